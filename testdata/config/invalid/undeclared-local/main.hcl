locals {
  head_host = "10.1.230.180"
}

node "spark1" {
  host = local.head
}

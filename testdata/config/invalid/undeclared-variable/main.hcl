variable "host" {
  default = "10.1.230.180"
}

node "spark1" {
  host = var.hots
}

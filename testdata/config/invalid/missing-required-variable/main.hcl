variable "host" {
  type        = string
  description = "SSH address of the head."
}

node "spark1" {
  host = var.host
}

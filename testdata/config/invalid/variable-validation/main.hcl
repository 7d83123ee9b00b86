variable "gpus" {
  type    = number
  default = 0

  validation {
    condition     = var.gpus >= 1
    error_message = "A node needs at least one GPU."
  }
}

node "spark1" {
  host = "a"
  gpus = var.gpus
}

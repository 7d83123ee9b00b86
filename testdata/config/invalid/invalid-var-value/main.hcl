variable "gpus" {
  type    = number
  default = 1
}

variable "host" {
  default = "a"
}

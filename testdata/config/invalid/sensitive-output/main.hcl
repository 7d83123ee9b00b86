variable "token" {
  type      = string
  default   = "hf_xxx"
  sensitive = true
}

output "token" {
  value = "Bearer ${var.token}"
}

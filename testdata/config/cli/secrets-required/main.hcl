# A configuration whose every variable is required (no defaults): validate
# and graph check it without values, as in CI without secrets; plan refuses.

variable "head_host" {
  type = string
}
variable "hf_token" {
  type      = string
  sensitive = true
}
variable "gpus" {
  type = number
  validation {
    condition     = var.gpus > 0
    error_message = "gpus must be positive"
  }
}
node "a" {
  host = var.head_host
  gpus = var.gpus
}
ray_cluster "c" {
  image = "img"
  head  = node.a
}
vllm_serve "s" {
  cluster              = ray_cluster.c
  model                = "m"
  env                  = { HF_TOKEN = var.hf_token }
  tensor_parallel_size = var.gpus
}
output "endpoint" {
  value = vllm_serve.s.endpoint
}

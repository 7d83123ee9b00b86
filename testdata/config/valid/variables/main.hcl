variable "image" {
  type    = string
  default = "vllm/vllm-openai:latest"
}

variable "head_host" {
  type = string
}

variable "gpus" {
  type    = number
  default = 1
}

variable "workers" {
  type    = list(string)
  default = []
}

variable "token" {
  type      = string
  sensitive = true
  default   = "hf_default"
}

locals {
  env = { HF_TOKEN = var.token, MODE = "prod" }
}

node "head" {
  host = var.head_host
  gpus = var.gpus
}

node "worker" {
  for_each = toset(var.workers)
  host     = each.key
  gpus     = var.gpus
}

network "fabric" {
  cidr = "192.168.200.0/24"
}

ray_cluster "main" {
  image   = var.image
  head    = node.head
  workers = values(node.worker)
  network = network.fabric
  env     = local.env
}

output "token" {
  value     = var.token
  sensitive = true
}

output "workers" {
  value = ray_cluster.main.workers
}

variable "token" {
  sensitive = true
  default   = "sk-not-for-argv"
}

node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image = "img"
  head  = node.spark1
}

vllm_serve "qwen" {
  cluster    = ray_cluster.main
  model      = "Qwen/Qwen3-8B"
  extra_args = ["--api-key", var.token]
}

vllm_serve "other" {
  cluster    = ray_cluster.main
  model      = "Qwen/Qwen3-8B"
  port       = 8001
  extra_args = ["--hf-token", var.token]
}

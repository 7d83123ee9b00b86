variable "token" {
  sensitive = true
  default   = "sec\nLD_PRELOAD=/x.so"
}

node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image = "img"
  head  = node.spark1
  env   = { HF_TOKEN = var.token, NUL = "a\u0000b", CR = "a\rb" }
}

vllm_serve "qwen" {
  cluster = ray_cluster.main
  model   = "Qwen/Qwen3-8B"
}

# An image reference docker cannot parse (issue 22, item 2): refused by
# validate, with the parser the observation and apply use.
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image = "Hello World:latest"
  head  = node.spark1
}

ray_cluster "upper" {
  image = "vllm/VLLM-openai:v0.11.0"
  head  = node.spark2
}

node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}

vllm_serve "qwen" {
  cluster = ray_cluster.main
  model   = "Qwen/Qwen3-8B"
}

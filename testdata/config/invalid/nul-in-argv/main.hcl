# A NUL byte in any value that reaches a command line (issue 22, item 2):
# the host cannot take it, so validate refuses it before apply stops anything.
node "spark1" {
  host = "10.1.230.180"
  gpus = 1
}

ray_cluster "main" {
  image       = "vllm/vllm-openai:v0.11.0"
  head        = node.spark1
  docker_args = ["--label", "a\u0000b"]
  volumes     = ["/data/hf\u0000:/root/.cache/huggingface"]
}

node "spark2" {
  host = "10.1.230.181"
  gpus = 1
}

ray_cluster "other" {
  image = "vllm/vllm-openai:v0.11.0"
  head  = node.spark2
}

vllm_serve "qwen" {
  cluster           = ray_cluster.other
  model             = "Qwen/Qwen3-8B\u0000"
  served_model_name = "qwen"
  extra_args        = ["--max-num-seqs", "8\u0000"]
}

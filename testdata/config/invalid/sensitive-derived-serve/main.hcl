# Values derived from a sensitive variable in each argument of a
# vllm_serve that would carry them to vLLM's command line (issue 23, item
# 6); env and api_key take them. See sensitive-derived-cluster.
variable "hf_token" {
  sensitive = true
  default   = "hf_sEcReT_not_for_argv"
}

variable "n" {
  sensitive = true
  default   = 2
}

node "spark1" {
  host = "10.1.230.180"
  gpus = 2
}

ray_cluster "main" {
  image = "img"
  head  = node.spark1
}

vllm_serve "qwen" {
  cluster              = ray_cluster.main
  model                = upper(var.hf_token)
  served_model_name    = "s${var.hf_token}"
  tensor_parallel_size = var.n
  extra_args           = ["--enforce-eager", join(",", ["x", var.hf_token])]
  api_key              = trimspace(var.hf_token)
  env                  = { TOKEN = lower(var.hf_token) }
}

vllm_serve "other" {
  cluster           = ray_cluster.main
  model             = "Qwen/Qwen3-8B"
  served_model_name = try(var.hf_token, "x")
  max_model_len     = var.n > 1 ? 4096 : 8192
  port              = 8001
}

# Values derived from a sensitive variable, through every kind of
# expression, in each argument that would carry them to a command line,
# a container's name or label, or a mount (issue 23, item 6). Each is
# refused at its argument, naming the path, never the value; env and
# api_key take them. vllm_serve: see sensitive-derived-serve.
variable "hf_token" {
  sensitive = true
  default   = "hf_sEcReT_not_for_argv"
}

locals {
  label  = "tok=${var.hf_token}"
  mounts = { cache = "/data/${var.hf_token}:/cache" }
}

node "spark1" {
  host = "10.1.230.180"
  gpus = 2
}

ray_cluster "main" {
  image          = var.hf_token == "" ? "img:a" : "img:b"
  head           = node.spark1
  docker_args    = ["--label", local.label]
  volumes        = [for k, v in local.mounts : v]
  container_name = format("ray-%s", var.hf_token)
  port           = length(var.hf_token) + 6000
  env            = { HF_TOKEN = var.hf_token, AUTH = "Bearer ${var.hf_token}" }
}

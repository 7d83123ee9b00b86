# Four H100 servers with eight GPUs each: tensor parallelism inside a server
# (TP=8 over NVLink) and pipeline parallelism across servers (PP=4 over
# InfiniBand, one stage per server). The nodes come from one block with for_each, so growing to
# 8 or 64 servers means adding entries to var.hosts, not blocks.
#
#   rayform -chdir=examples/h100-4x8-pp validate
#   rayform -chdir=examples/h100-4x8-pp graph | dot -Tsvg > graph.svg

variable "hosts" {
  description = "Node key => SSH address. The key \"h1\" is the Ray head."
  type        = map(string)
  default = {
    h1 = "h100-01.lab.internal"
    h2 = "h100-02.lab.internal"
    h3 = "h100-03.lab.internal"
    h4 = "h100-04.lab.internal"
  }

  validation {
    condition     = contains(keys(var.hosts), "h1")
    error_message = "hosts must contain the key \"h1\", the Ray head."
  }
}

variable "hf_token" {
  description = "Hugging Face token for the gated Llama weights."
  type        = string
  default     = "hf_example_not_a_real_token"
  sensitive   = true
}

locals {
  head_key = "h1"
}

node "jump" {
  host = "bastion.lab.internal"
  user = "ops"
}

node "h100" {
  for_each = var.hosts

  host          = each.value
  user          = "ops"
  identity_file = "~/.ssh/lab_ed25519"
  bastion       = node.jump
  gpus          = 8
  labels = {
    role = each.key == "h1" ? "head" : "worker"
  }
}

network "ib" {
  cidr   = "10.200.0.0/16"
  ib_hca = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
  mtu    = 4092
  # The IPoIB interface that carries the fabric addresses, the same on
  # every server. Where names differ, a map keyed by the for_each keys
  # ({ h1 = "ib0", h2 = "ib1" }) or fabric_interface in the node block pins
  # it per node.
  interface = "ib0"
}

ray_cluster "main" {
  image    = "vllm/vllm-openai:v0.11.0"
  head     = node.h100[local.head_key]
  workers  = [for k, n in node.h100 : n if k != local.head_key]
  network  = network.ib
  volumes  = ["/data/hf:/root/.cache/huggingface"]
  env = {
    HF_TOKEN = var.hf_token
  }
  docker_args = ["--privileged"]
}

vllm_serve "llama405b" {
  cluster                = ray_cluster.main
  model                  = "meta-llama/Llama-3.1-405B-Instruct-FP8"
  tensor_parallel_size   = 8
  pipeline_parallel_size = length(var.hosts) # one pipeline stage per server
  max_model_len          = 32768
  ready_timeout          = "45m"
}

output "endpoint" {
  value = vllm_serve.llama405b.endpoint
}

output "head_fabric_ip" {
  value = network.ib.addresses[node.h100["h1"].name]
}

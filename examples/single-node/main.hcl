# One GPU server serving a model on its own GPUs: a Ray cluster with a head
# and no workers. The fabric is the server's own LAN; pinning it still
# matters on hosts with several interfaces (docker0, VPNs), because Ray and
# vLLM otherwise pick the address of the default route.
#
#   rayform -chdir=examples/single-node validate -var host=gpu-box

variable "host" {
  description = "SSH address of the GPU server, or a Host alias from ~/.ssh/config."
  type        = string
  default     = "gpu-box"
}

variable "gpus" {
  description = "GPUs in the server; the model is sharded across all of them."
  type        = number
  default     = 2

  validation {
    condition     = var.gpus >= 1 && floor(var.gpus) == var.gpus
    error_message = "gpus must be a whole number of at least 1."
  }
}

variable "hf_token" {
  description = "Hugging Face token, for gated models."
  type        = string
  default     = ""
  sensitive   = true
}

node "box" {
  host = var.host
  gpus = var.gpus
}

network "lan" {
  cidr = "10.0.0.0/24"
}

ray_cluster "local" {
  image   = "vllm/vllm-openai:v0.11.0"
  head    = node.box
  network = network.lan
  env = {
    HF_TOKEN = var.hf_token
  }
}

vllm_serve "llama" {
  cluster              = ray_cluster.local
  model                = "meta-llama/Llama-3.1-8B-Instruct"
  tensor_parallel_size = var.gpus
  max_model_len        = 16384
  extra_args           = ["--enable-prefix-caching"]
}

output "endpoint" {
  value = vllm_serve.llama.endpoint
}

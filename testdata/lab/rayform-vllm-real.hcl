# rayform configuration of lab "rflab", written by `rflab up`.
# Run rayform against it with:
#
#   rflab run -name rflab plan    (or apply, status, logs vllm_serve.qwen, ...)
#
# which runs the rayform beside rflab in the lab's client namespace (the only
# one with a route to the nodes), with the lab's client home (its ~/.ssh knows
# the nodes' host keys), in this directory:
#
#   ip netns exec rflab-client env HOME=/tmp/rayform-lab-rflab/client-home rayform -chdir /tmp/rayform-lab-rflab plan
#
# SSH: /tmp/rayform-lab-rflab/ssh_config (known_hosts: /tmp/rayform-lab-rflab/known_hosts).

rayform {
  project = "rayform-lab-rflab"
}

node "spark1" {
  host          = "10.1.230.180"
  user          = "root"
  identity_file = "/tmp/rayform-lab-rflab/id_ed25519"
  gpus          = 1
}

node "spark2" {
  host          = "10.1.230.181"
  user          = "root"
  identity_file = "/tmp/rayform-lab-rflab/id_ed25519"
  gpus          = 1
}

network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = "enp1s0f1np1"
}

# The names below are examples/dgx-spark-pair's (two DGX Sparks serving Qwen3.5),
# so this file reads like that one; what runs under them differs. The image is
# not that GB10 image: lab up built it under that name into the lab's registry,
# holding the real Ray 2.53.0 and vLLM 0.32.0's CPU build (no CUDA).
ray_cluster "spark" {
  image          = "hellohal2064/vllm-qwen3.5-gb10"
  head           = node.spark1
  workers        = [node.spark2]
  network        = network.fabric
  memory_monitor = false
}

# The lab hub's rayform-lab/tiny-llama: on no node yet (lab up -model-seed=false).
model "tiny" {
  source   = "rayform-lab/tiny-llama"
  revision = "main"
  endpoint = "http://10.1.230.1:5080"
}

# Named qwen as in examples/dgx-spark-pair, but it serves the lab hub's
# rayform-lab/tiny-llama (served_model_name "tiny"), not Qwen.
vllm_serve "qwen" {
  cluster                = ray_cluster.spark
  model                  = model.tiny.source
  served_model_name      = "tiny"
  tensor_parallel_size   = 2
  gpu_memory_utilization = 0.85
  max_model_len          = 4096
  # vLLM 0.32.0's CPU build (lab up -vllm real). On the CPU platform
  # --gpu-memory-utilization is the share of the host's memory vLLM
  # reserves; an explicit KV cache size replaces it. The container has no
  # C++ compiler for torch.compile's CPU code: eager mode. float32: the
  # model's own type, which every x86 CPU's kernels take.
  extra_args             = ["--kv-cache-memory-bytes", "64M", "--enforce-eager", "--dtype", "float32"]
  ready_timeout          = "15m"
}

output "endpoint" {
  value = vllm_serve.qwen.endpoint
}

# The head's management address: vLLM answers there only with
# listen = "all" (by default it listens on the head's fabric address).
output "public_endpoint" {
  value = vllm_serve.qwen.public_endpoint
}

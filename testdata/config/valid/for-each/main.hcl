# Eight nodes from one block, reached through a two-hop bastion chain, with
# per-node interface names built by a for expression.
locals {
  keys = toset([for i in range(1, 9) : format("n%d", i)])
}

node "edge" {
  host = "edge.example"
}

node "jump" {
  host    = "jump.internal"
  bastion = node.edge
}

node "gpu" {
  for_each = local.keys
  host     = "${each.key}.internal"
  port     = 2222
  bastion  = node.jump
  gpus     = 8
  labels   = { index = trimprefix(each.key, "n") }
}

network "ib" {
  cidr   = "10.200.0.0/16"
  ib_hca = ["mlx5_0"]
  interface = merge(
    { for k, n in node.gpu : n.name => "ib0" },
    { (node.gpu["n8"].name) = "ib1" },
  )
}

ray_cluster "big" {
  image          = "img"
  head           = node.gpu["n1"]
  workers        = [for k, n in node.gpu : n if k != "n1"]
  network        = network.ib
  port           = 6380
  dashboard_port = 8266
  container_name = "ray-big"
}

vllm_serve "m" {
  cluster                = ray_cluster.big
  model                  = "m"
  tensor_parallel_size   = 8
  pipeline_parallel_size = length(ray_cluster.big.workers) + 1
  port                   = 9000
}

output "ib_of_n1" {
  value = network.ib.addresses[node.gpu["n1"].name]
}

output "dashboard" {
  value = ray_cluster.big.dashboard_url
}

node "gpu" {
  for_each = toset(["a", "b"])
  host     = "${each.key}.example"
  gpus     = 8
}

network "fabric" {
  cidr = "10.0.0.0/8"
}

ray_cluster "main" {
  image   = "img"
  head    = node.gpu
  network = network.fabric
}

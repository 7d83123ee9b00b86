node "gpu" {
  for_each = { h1 = "10.0.0.1", h2 = "10.0.0.2" }
  host     = each.value
  gpus     = 8
}

network "fabric" {
  cidr = "10.0.0.0/8"
}

ray_cluster "main" {
  image   = "img"
  head    = node.gpu["h3"]
  network = network.fabric
}

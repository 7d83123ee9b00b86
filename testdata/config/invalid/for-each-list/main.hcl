node "gpu" {
  for_each = ["10.0.0.1", "10.0.0.2"]
  host     = each.value
}

node "gpu" {
  for_each = { a = "10.0.0.1" }
  host     = each.vaule
}

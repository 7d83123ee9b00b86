node "spark1" {
  host = each.value
}

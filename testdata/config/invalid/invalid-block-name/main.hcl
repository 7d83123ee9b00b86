node "1spark" {
  host = "a"
}

node "b" {
  host = 
}

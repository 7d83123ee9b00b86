node "a" {
	host = "x" port = 22
}

package main

// Placeholders replaced by the real commands as they land. (None left.)

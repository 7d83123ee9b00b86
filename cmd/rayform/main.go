// Command rayform brings up Ray clusters and vLLM servers across GPU hosts
// reached over SSH, declaratively: validate, plan, apply, destroy.
package main

import (
	"os"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

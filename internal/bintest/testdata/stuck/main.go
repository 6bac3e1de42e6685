// Command stuck is the program TestDumpStacks asks for its stacks: one
// goroutine of ours waits forever on a channel nobody sends on.
package main

import (
	"fmt"
	"os"
)

func waitForever(c chan int) { <-c }

func main() {
	fmt.Println("waiting")
	os.Stdout.Sync()
	waitForever(make(chan int))
}

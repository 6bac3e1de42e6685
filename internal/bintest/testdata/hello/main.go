// Command hello is the program TestBuild builds.
package main

import "fmt"

func main() { fmt.Println("hello from bintest") }

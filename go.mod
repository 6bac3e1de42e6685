module github.com/gpunet/gpunet

go 1.26.8

require filippo.io/age v1.3.2

require (
	filippo.io/hpke v0.4.0 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

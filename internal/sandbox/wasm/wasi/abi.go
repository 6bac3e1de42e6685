package wasi

// The preview1 ABI: errno values, type codes, flags and struct layouts, as
// wasi_snapshot_preview1 defines them (witx, typenames.witx).

// Errno is a WASI error code.
type Errno uint32

// The errnos this implementation returns.
const (
	ErrnoSuccess     Errno = 0
	Errno2big        Errno = 1
	ErrnoAcces       Errno = 2
	ErrnoAgain       Errno = 6
	ErrnoBadf        Errno = 8
	ErrnoBusy        Errno = 10
	ErrnoExist       Errno = 20
	ErrnoFault       Errno = 21
	ErrnoFbig        Errno = 22
	ErrnoIlseq       Errno = 25
	ErrnoIntr        Errno = 27
	ErrnoInval       Errno = 28
	ErrnoIo          Errno = 29
	ErrnoIsdir       Errno = 31
	ErrnoLoop        Errno = 32
	ErrnoMfile       Errno = 33
	ErrnoMlink       Errno = 34
	ErrnoNametoolong Errno = 37
	ErrnoNfile       Errno = 41
	ErrnoNoent       Errno = 44
	ErrnoNomem       Errno = 48
	ErrnoNospc       Errno = 51
	ErrnoNosys       Errno = 52
	ErrnoNotdir      Errno = 54
	ErrnoNotempty    Errno = 55
	ErrnoNotsock     Errno = 57
	ErrnoNotsup      Errno = 58
	ErrnoNotty       Errno = 59
	ErrnoOverflow    Errno = 61
	ErrnoPerm        Errno = 63
	ErrnoPipe        Errno = 64
	ErrnoRange       Errno = 68
	ErrnoRofs        Errno = 69
	ErrnoSpipe       Errno = 70
	ErrnoXdev        Errno = 75
	ErrnoNotcapable  Errno = 76
)

// File types (filetype).
const (
	filetypeUnknown         = 0
	filetypeCharacterDevice = 2
	filetypeDirectory       = 3
	filetypeRegularFile     = 4
	filetypeSymbolicLink    = 7
)

// Clock ids (clockid).
const (
	clockRealtime         = 0
	clockMonotonic        = 1
	clockProcessCPUTimeID = 2
	clockThreadCPUTimeID  = 3
)

// fdflags.
const (
	fdflagAppend   = 1 << 0
	fdflagDsync    = 1 << 1
	fdflagNonblock = 1 << 2
	fdflagRsync    = 1 << 3
	fdflagSync     = 1 << 4
)

// oflags.
const (
	oflagCreat     = 1 << 0
	oflagDirectory = 1 << 1
	oflagExcl      = 1 << 2
	oflagTrunc     = 1 << 3
)

// fstflags.
const (
	fstflagAtim    = 1 << 0
	fstflagAtimNow = 1 << 1
	fstflagMtim    = 1 << 2
	fstflagMtimNow = 1 << 3
)

// Rights (rights), the ones this implementation looks at.
const (
	rightFdDatasync           = 1 << 0
	rightFdRead               = 1 << 1
	rightFdSeek               = 1 << 2
	rightFdFdstatSetFlags     = 1 << 3
	rightFdSync               = 1 << 4
	rightFdTell               = 1 << 5
	rightFdWrite              = 1 << 6
	rightFdAdvise             = 1 << 7
	rightFdAllocate           = 1 << 8
	rightPathCreateDirectory  = 1 << 9
	rightPathCreateFile       = 1 << 10
	rightPathLinkSource       = 1 << 11
	rightPathLinkTarget       = 1 << 12
	rightPathOpen             = 1 << 13
	rightFdReaddir            = 1 << 14
	rightPathReadlink         = 1 << 15
	rightPathRenameSource     = 1 << 16
	rightPathRenameTarget     = 1 << 17
	rightPathFilestatGet      = 1 << 18
	rightPathFilestatSetSize  = 1 << 19
	rightPathFilestatSetTimes = 1 << 20
	rightFdFilestatGet        = 1 << 21
	rightFdFilestatSetSize    = 1 << 22
	rightFdFilestatSetTimes   = 1 << 23
	rightPathSymlink          = 1 << 24
	rightPathRemoveDirectory  = 1 << 25
	rightPathUnlinkFile       = 1 << 26
	rightPollFdReadwrite      = 1 << 27
	rightSockShutdown         = 1 << 28
	rightSockAccept           = 1 << 29

	// rightsFile are the rights that make sense on a regular file.
	rightsFile = rightFdDatasync | rightFdRead | rightFdSeek | rightFdFdstatSetFlags |
		rightFdSync | rightFdTell | rightFdWrite | rightFdAdvise | rightFdAllocate |
		rightFdFilestatGet | rightFdFilestatSetSize | rightFdFilestatSetTimes | rightPollFdReadwrite
	// rightsDir are the rights that make sense on a directory.
	rightsDir = rightFdFdstatSetFlags | rightFdSync | rightFdAdvise | rightPathCreateDirectory |
		rightPathCreateFile | rightPathLinkSource | rightPathLinkTarget | rightPathOpen |
		rightFdReaddir | rightPathReadlink | rightPathRenameSource | rightPathRenameTarget |
		rightPathFilestatGet | rightPathFilestatSetSize | rightPathFilestatSetTimes |
		rightFdFilestatGet | rightFdFilestatSetTimes | rightPathSymlink |
		rightPathRemoveDirectory | rightPathUnlinkFile
	// rightsChange are the rights that change the files (Config.ReadOnly
	// withholds them).
	rightsChange = rightFdWrite | rightFdAllocate |
		rightFdFilestatSetSize | rightFdFilestatSetTimes | rightPathCreateDirectory |
		rightPathCreateFile | rightPathLinkSource | rightPathLinkTarget |
		rightPathRenameSource | rightPathRenameTarget | rightPathFilestatSetSize |
		rightPathFilestatSetTimes | rightPathSymlink | rightPathRemoveDirectory |
		rightPathUnlinkFile
	// rightsStdio are those of the standard streams.
	rightsStdio = rightFdRead | rightFdWrite | rightFdFdstatSetFlags | rightFdFilestatGet | rightPollFdReadwrite
)

// Event types (eventtype) and subscription flags.
const (
	eventtypeClock   = 0
	eventtypeFdRead  = 1
	eventtypeFdWrite = 2

	subclockAbstime = 1

	eventrwflagHangup = 1
)

// Sizes of the structs this implementation reads and writes.
const (
	sizeofFilestat     = 64
	sizeofFdstat       = 24
	sizeofPrestat      = 8
	sizeofIovec        = 8
	sizeofDirent       = 24
	sizeofSubscription = 48
	sizeofEvent        = 32
)

package mirror

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW

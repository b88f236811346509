// Package testkit holds what only tests use: the servers tests run
// against (sshdtest, and hostile, whose servers lie), the TCP proxy that
// injects network faults (faultproxy), the strace recorder and the
// forgetful file system of the power-loss replay (fsrecord), and the
// fixtures tests build on (testenv). It lives apart so that `ls internal`
// shows which packages are the product.
//
// Guarantees:
//
//   - Nothing that ships imports it. Only _test.go files and other
//     packages under internal/testkit import a package below it; a
//     package elsewhere whose non-test files import one fails
//     TestNothingThatShipsImportsTheTestKit.
//   - This package itself is empty: the kit is its subpackages.
package testkit

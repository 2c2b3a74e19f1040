// Package realclients holds tests that run programs we did not write and
// that link libsanlock (libvirt's sanlock lock plugin driving QEMU guests,
// sanlk-reset) against our daemon and against sanlock 3.8.5. They need
// root and the Debian packages that .ci/run installs; run them with
// `make realclients`.
package realclients

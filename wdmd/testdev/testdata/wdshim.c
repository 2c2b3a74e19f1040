/*
 * wdshim: an LD_PRELOAD library that lets an unmodified C wdmd use an
 * emulated watchdog device served by testdev.Bank (wdmd/testdev/net.go).
 *
 * The device path named by WDSHIM_PATH must exist as a plain file (wdmd
 * stats it). Opening it connects to the bank socket WDSHIM_SOCK and sends
 * "open PATH"; the socket descriptor is then the device descriptor. The
 * watchdog ioctls (get/set timeout, keepalive), write and close on that
 * descriptor become the bank's text requests. When the process dies the
 * socket closes without "close", which the bank treats as an unclean
 * close, as the kernel does for a holder that dies.
 *
 * Built in the Debian trees by the tests: gcc -shared -fPIC -o wdshim.so wdshim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define WD_GETTIMEOUT 0x80045707UL
#define WD_SETTIMEOUT 0xC0045706UL
#define WD_KEEPALIVE 0x80045705UL

#define MAXFD 1024
static char is_dev[MAXFD];

static int raw_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		long r = syscall(SYS_write, fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= r;
	}
	return 0;
}

/* call sends one request line and returns the answer's number; on an
 * "err E" answer it sets errno to E and returns -1. */
static int call(int fd, const char *line)
{
	char buf[128];
	size_t n = 0;
	if (raw_write_all(fd, line, strlen(line)) < 0) {
		errno = EIO;
		return -1;
	}
	while (n < sizeof(buf) - 1) {
		long r = syscall(SYS_read, fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			errno = EIO;
			return -1;
		}
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	if (!strncmp(buf, "ok ", 3))
		return atoi(buf + 3);
	if (!strncmp(buf, "err ", 4)) {
		errno = atoi(buf + 4);
		return -1;
	}
	errno = EIO;
	return -1;
}

static int is_device_path(const char *path)
{
	const char *want = getenv("WDSHIM_PATH");
	return want && path && !strcmp(path, want);
}

static int open_device(const char *path)
{
	const char *sock = getenv("WDSHIM_SOCK");
	struct sockaddr_un sa;
	char line[256];
	int fd, saved;

	if (!sock || strlen(sock) >= sizeof(sa.sun_path)) {
		errno = ENODEV;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		syscall(SYS_close, fd);
		errno = ENODEV;
		return -1;
	}
	snprintf(line, sizeof(line), "open %s\n", path);
	if (call(fd, line) < 0) {
		saved = errno;
		syscall(SYS_close, fd);
		errno = saved;
		return -1;
	}
	if (fd < MAXFD)
		is_dev[fd] = 1;
	return fd;
}

typedef int (*openat_fn)(int, const char *, int, ...);

static int do_openat(const char *name, int dirfd, const char *path, int flags, va_list ap)
{
	mode_t mode = 0;
	openat_fn real;
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	if (is_device_path(path))
		return open_device(path);
	real = (openat_fn)dlsym(RTLD_NEXT, name);
	return real(dirfd, path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode = 0;
	int (*real)(const char *, int, ...);
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	if (is_device_path(path))
		return open_device(path);
	real = dlsym(RTLD_NEXT, "open");
	return real(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode = 0;
	int (*real)(const char *, int, ...);
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	if (is_device_path(path))
		return open_device(path);
	real = dlsym(RTLD_NEXT, "open64");
	return real(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	int r;
	va_start(ap, flags);
	r = do_openat("openat", dirfd, path, flags, ap);
	va_end(ap);
	return r;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	int r;
	va_start(ap, flags);
	r = do_openat("openat64", dirfd, path, flags, ap);
	va_end(ap);
	return r;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	char line[64];
	int r;
	int (*real)(int, unsigned long, ...);

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd < 0 || fd >= MAXFD || !is_dev[fd]) {
		real = dlsym(RTLD_NEXT, "ioctl");
		return real(fd, req, arg);
	}
	switch (req) {
	case WD_GETTIMEOUT:
		r = call(fd, "get\n");
		if (r < 0)
			return -1;
		*(int *)arg = r;
		return 0;
	case WD_SETTIMEOUT:
		snprintf(line, sizeof(line), "set %d\n", *(int *)arg);
		r = call(fd, line);
		if (r < 0)
			return -1;
		*(int *)arg = r;
		return 0;
	case WD_KEEPALIVE:
		return call(fd, "ping\n") < 0 ? -1 : 0;
	}
	errno = ENOTTY;
	return -1;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char line[600];
	size_t i, k = 0;
	const unsigned char *p = buf;

	if (fd < 0 || fd >= MAXFD || !is_dev[fd])
		return syscall(SYS_write, fd, buf, n);
	if (n > 256)
		n = 256;
	k = snprintf(line, sizeof(line), "write ");
	for (i = 0; i < n; i++) {
		line[k++] = hex[p[i] >> 4];
		line[k++] = hex[p[i] & 15];
	}
	line[k++] = '\n';
	line[k] = 0;
	return call(fd, line);
}

int close(int fd)
{
	if (fd >= 0 && fd < MAXFD && is_dev[fd]) {
		is_dev[fd] = 0;
		call(fd, "close\n");
	}
	return syscall(SYS_close, fd);
}

/*
 * sanlk_newer: drive libsanlock calls, one per line of input, and print
 * one result line per call. Written for gosanlock's tests
 * (internal/debtree, daemon/newerinterop); compiled in the Debian sid
 * tree against libsanlock 5.1.1, whose public headers it uses.
 *
 * Usage: sanlk_newer CALL ARGS...   one call from the command line
 *        sanlk_newer -              calls read from stdin, one a line
 *
 * Output, one line per call: the call's name, "rv=N" (the library's
 * return value) and the fields the call returned, as key=value words.
 * Strings are printed as they are (names hold no blanks).
 *
 * "pid" arguments of acquire/acquire2/release/inquire: "self" uses the
 * connection of an earlier "register" (pid -1); a number is sent as the
 * pid (or, with the FOR_CLIENT_ID flag 0x10, as the client index) on a
 * new connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <sanlock.h>
#include <sanlock_admin.h>
#include <sanlock_resource.h>

static int reg_sock = -1;

static uint64_t num(const char *s) { return strtoull(s, NULL, 0); }

static void set_name(char *dst, const char *src)
{
	memset(dst, 0, SANLK_NAME_LEN);
	if (strcmp(src, "-"))
		strncpy(dst, src, SANLK_NAME_LEN);
}

static void print_name(const char *key, const char *n)
{
	char b[SANLK_NAME_LEN + 1];
	memcpy(b, n, SANLK_NAME_LEN);
	b[SANLK_NAME_LEN] = 0;
	printf(" %s=%s", key, b);
}

/* ls NAME PATH OFFSET HOSTID [FLAGS] */
static void make_ls(struct sanlk_lockspace *ls, char **a, int flags_too)
{
	memset(ls, 0, sizeof(*ls));
	set_name(ls->name, a[0]);
	strncpy(ls->host_id_disk.path, a[1], SANLK_PATH_LEN - 1);
	ls->host_id_disk.offset = num(a[2]);
	ls->host_id = num(a[3]);
	if (flags_too)
		ls->flags = num(a[4]);
}

/* res LSNAME RESNAME PATH OFFSET RESFLAGS */
static struct sanlk_resource *make_res(char **a)
{
	struct sanlk_resource *r = calloc(1, sizeof(*r) + sizeof(struct sanlk_disk));
	set_name(r->lockspace_name, a[0]);
	set_name(r->name, a[1]);
	r->num_disks = 1;
	strncpy(r->disks[0].path, a[2], SANLK_PATH_LEN - 1);
	r->disks[0].offset = num(a[3]);
	r->flags = num(a[4]);
	return r;
}

static void print_ls(struct sanlk_lockspace *ls)
{
	print_name("ls_name", ls->name);
	printf(" ls_host_id=%llu ls_flags=0x%x ls_path=%s ls_offset=%llu",
	       (unsigned long long)ls->host_id, ls->flags, ls->host_id_disk.path,
	       (unsigned long long)ls->host_id_disk.offset);
}

static void print_host(const char *p, struct sanlk_host *h)
{
	printf(" %shost_id=%llu %sgeneration=%llu %stimestamp=%llu %sio_timeout=%u %sflags=0x%x",
	       p, (unsigned long long)h->host_id, p, (unsigned long long)h->generation,
	       p, (unsigned long long)h->timestamp, p, h->io_timeout, p, h->flags);
}

/* sock and pid for a "pid" argument */
static void target(const char *a, int *sock, int *pid)
{
	if (!strcmp(a, "self")) {
		*sock = reg_sock;
		*pid = -1;
	} else {
		*sock = -1;
		*pid = (int)strtol(a, NULL, 0);
	}
}

#define NEED(n) do { if (argc < (n)) { printf("%s rv=usage\n", c); return; } } while (0)

static void call(int argc, char **a)
{
	const char *c = a[0];
	int rv, sock, pid;

	if (!strcmp(c, "register")) {
		rv = sanlock_register();
		if (rv >= 0)
			reg_sock = rv;
		printf("register rv=%d\n", rv);
	} else if (!strcmp(c, "add_lockspace")) {
		/* add_lockspace LS PATH OFF HOSTID FLAGS IO_TIMEOUT */
		struct sanlk_lockspace ls;
		NEED(7);
		make_ls(&ls, a + 1, 0);
		rv = sanlock_add_lockspace_timeout(&ls, num(a[5]), num(a[6]));
		printf("add_lockspace rv=%d\n", rv);
	} else if (!strcmp(c, "rem_lockspace")) {
		/* rem_lockspace LS PATH OFF HOSTID FLAGS */
		struct sanlk_lockspace ls;
		NEED(6);
		make_ls(&ls, a + 1, 0);
		rv = sanlock_rem_lockspace(&ls, num(a[5]));
		printf("rem_lockspace rv=%d\n", rv);
	} else if (!strcmp(c, "write_lockspace")) {
		/* write_lockspace LS PATH OFF HOSTID LSFLAGS MAX_HOSTS FLAGS IO_TIMEOUT */
		struct sanlk_lockspace ls;
		NEED(9);
		make_ls(&ls, a + 1, 1);
		rv = sanlock_write_lockspace(&ls, num(a[6]), num(a[7]), num(a[8]));
		printf("write_lockspace rv=%d\n", rv);
	} else if (!strcmp(c, "read_lockspace")) {
		/* read_lockspace LS PATH OFF HOSTID FLAGS */
		struct sanlk_lockspace ls;
		uint32_t io = 0;
		NEED(6);
		make_ls(&ls, a + 1, 0);
		rv = sanlock_read_lockspace(&ls, num(a[5]), &io);
		printf("read_lockspace rv=%d io_timeout=%u", rv, io);
		print_ls(&ls);
		printf("\n");
	} else if (!strcmp(c, "read_lockspace_host")) {
		/* read_lockspace_host LS PATH OFF HOSTID FLAGS */
		struct sanlk_lockspace ls;
		struct sanlk_host hs;
		uint32_t io = 0;
		NEED(6);
		make_ls(&ls, a + 1, 0);
		memset(&hs, 0, sizeof(hs));
		rv = sanlock_read_lockspace_host(&ls, num(a[5]), &io, &hs);
		printf("read_lockspace_host rv=%d io_timeout=%u", rv, io);
		print_ls(&ls);
		print_host("h_", &hs);
		printf("\n");
	} else if (!strcmp(c, "init_lockspace_host")) {
		/* init_lockspace_host LS PATH OFF HOSTID LSFLAGS HOSTNAME GENERATION TIMESTAMP FLAGS IO_TIMEOUT */
		struct sanlk_lockspace ls;
		char hn[SANLK_NAME_LEN + 1];
		NEED(11);
		make_ls(&ls, a + 1, 1);
		memset(hn, 0, sizeof(hn));
		if (strcmp(a[6], "-"))
			strncpy(hn, a[6], SANLK_NAME_LEN);
		rv = sanlock_init_lockspace_host(&ls, strcmp(a[6], "-") ? hn : NULL,
						 num(a[7]), num(a[8]), num(a[9]), num(a[10]));
		printf("init_lockspace_host rv=%d\n", rv);
	} else if (!strcmp(c, "set_host")) {
		/* set_host LS PATH OFF HOSTID CMD FLAGS IO_TIMEOUT H_HOST_ID H_GENERATION H_TIMESTAMP H_IO_TIMEOUT H_FLAGS */
		struct sanlk_lockspace ls;
		struct sanlk_host hs;
		NEED(13);
		make_ls(&ls, a + 1, 0);
		memset(&hs, 0, sizeof(hs));
		hs.host_id = num(a[8]);
		hs.generation = num(a[9]);
		hs.timestamp = num(a[10]);
		hs.io_timeout = num(a[11]);
		hs.flags = num(a[12]);
		rv = sanlock_set_host(&ls, num(a[5]), num(a[6]), num(a[7]), &hs);
		printf("set_host rv=%d\n", rv);
	} else if (!strcmp(c, "get_hosts")) {
		/* get_hosts LS HOST_ID FLAGS */
		struct sanlk_host *hss = NULL;
		int n = 0, i;
		NEED(4);
		rv = sanlock_get_hosts(a[1], num(a[2]), &hss, &n, num(a[3]));
		printf("get_hosts rv=%d count=%d", rv, n);
		for (i = 0; i < n; i++) {
			char p[16];
			snprintf(p, sizeof(p), "h%d_", i);
			print_host(p, &hss[i]);
		}
		printf("\n");
		free(hss);
	} else if (!strcmp(c, "set_config")) {
		/* set_config LS FLAGS CMD VALUE */
		uint32_t v;
		NEED(5);
		v = num(a[4]);
		rv = sanlock_set_config(a[1], num(a[2]), num(a[3]), &v);
		printf("set_config rv=%d\n", rv);
	} else if (!strcmp(c, "write_resource")) {
		/* write_resource LS RES PATH OFF RESFLAGS MAX_HOSTS NUM_HOSTS FLAGS */
		struct sanlk_resource *r;
		NEED(9);
		r = make_res(a + 1);
		rv = sanlock_write_resource(r, num(a[6]), num(a[7]), num(a[8]));
		printf("write_resource rv=%d\n", rv);
		free(r);
	} else if (!strcmp(c, "read_resource")) {
		/* read_resource LS RES PATH OFF RESFLAGS FLAGS */
		struct sanlk_resource *r;
		NEED(7);
		r = make_res(a + 1);
		rv = sanlock_read_resource(r, num(a[6]));
		printf("read_resource rv=%d", rv);
		print_name("ls_name", r->lockspace_name);
		print_name("res_name", r->name);
		printf(" lver=%llu flags=0x%x\n", (unsigned long long)r->lver, r->flags);
		free(r);
	} else if (!strcmp(c, "acquire") || !strcmp(c, "acquire2")) {
		/* acquire[2] LS RES PATH OFF RESFLAGS FLAGS PID */
		struct sanlk_resource *r;
		NEED(8);
		r = make_res(a + 1);
		target(a[7], &sock, &pid);
		if (!strcmp(c, "acquire")) {
			rv = sanlock_acquire(sock, pid, num(a[6]), 1, &r, NULL);
			printf("acquire rv=%d\n", rv);
		} else {
			struct sanlk_host owner;
			char *owner_name = NULL;
			memset(&owner, 0, sizeof(owner));
			rv = sanlock_acquire2(sock, pid, num(a[6]), r, NULL, &owner, &owner_name);
			printf("acquire2 rv=%d", rv);
			print_host("owner_", &owner);
			printf(" owner_name=%s\n", owner_name ? owner_name : "");
			free(owner_name);
		}
		free(r);
	} else if (!strcmp(c, "release")) {
		/* release LS RES PATH OFF RESFLAGS FLAGS PID */
		struct sanlk_resource *r;
		NEED(8);
		r = make_res(a + 1);
		target(a[7], &sock, &pid);
		rv = sanlock_release(sock, pid, num(a[6]), 1, &r);
		printf("release rv=%d\n", rv);
		free(r);
	} else if (!strcmp(c, "inquire")) {
		/* inquire FLAGS PID */
		int n = 0;
		char *state = NULL;
		NEED(3);
		target(a[2], &sock, &pid);
		rv = sanlock_inquire(sock, pid, num(a[1]), &n, &state);
		printf("inquire rv=%d count=%d state=%s\n", rv, n, state ? state : "");
		free(state);
	} else if (!strcmp(c, "version")) {
		uint32_t v = 0, p = 0;
		rv = sanlock_version(0, &v, &p);
		printf("version rv=%d version=0x%08x proto=0x%08x\n", rv, v, p);
	} else if (!strcmp(c, "pid")) {
		printf("pid rv=0 pid=%d\n", getpid());
	} else if (!strcmp(c, "sleep")) {
		NEED(2);
		usleep(num(a[1]) * 1000);
		printf("sleep rv=0\n");
	} else {
		printf("%s rv=unknown\n", c);
	}
}

int main(int argc, char **argv)
{
	char line[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: sanlk_newer CALL ARGS... | sanlk_newer -\n");
		return 2;
	}
	if (strcmp(argv[1], "-")) {
		call(argc - 1, argv + 1);
		return 0;
	}
	while (fgets(line, sizeof(line), stdin)) {
		char *a[32];
		int n = 0;
		char *s = strtok(line, " \t\n");
		while (s && n < 32) {
			a[n++] = s;
			s = strtok(NULL, " \t\n");
		}
		if (n)
			call(n, a);
	}
	return 0;
}

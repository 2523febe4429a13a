/*
 * net.c - socket helpers: address text, listening sockets, fd limit, the
 * service manager's notify socket, and the process signals' mask.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include "core.h"

/* Accept queue length: the kernel caps it at net.core.somaxconn. A long
 * queue is also where clients wait while max_connections holds accepts. */
#define LB_NET_BACKLOG 4096

const char *
lb_net_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "unknown");
    }
    return buf;
}

/* A non-blocking socket of type (SOCK_STREAM, SOCK_DGRAM) with lb's
 * listening options, bound to addr; not listening yet. -1 with err set and
 * errno kept for the caller. */
static int
lb_net_bind(const struct sockaddr *addr, socklen_t len, int type, bool reuseport,
            char *err, size_t errlen)
{
    int one = 1, e;
    int fd = socket(addr->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        e = errno;
        snprintf(err, errlen, "socket: %s", strerror(e));
        errno = e;
        return -1;
    }
    /* REUSEADDR: restart while old connections sit in TIME_WAIT.
     * REUSEPORT: every worker binds its own socket to the same address and
     * the kernel spreads new connections over them, so workers never share
     * an accept queue or a lock. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
        (reuseport &&
         setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1)) {
        e = errno;
        snprintf(err, errlen, "setsockopt: %s", strerror(e));
        goto fail;
    }
    /* Accepted sockets inherit TCP_NODELAY from the listener on Linux: one
     * setsockopt here instead of one per connection. A proxy must not add
     * Nagle's delay to small writes. */
    if (type == SOCK_STREAM)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (addr->sa_family == AF_INET6)    /* [::]:80 means IPv6 only, as nginx */
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, addr, len) == -1) {
        e = errno;
        snprintf(err, errlen, "bind: %s", strerror(e));
        goto fail;
    }
    return fd;
fail:
    close(fd);
    errno = e;
    return -1;
}

int
lb_net_listen(const struct sockaddr *addr, socklen_t len, int type, bool reuseport,
              char *err, size_t errlen)
{
    int fd = lb_net_bind(addr, len, type, reuseport, err, errlen);

    if (fd >= 0 && type == SOCK_STREAM && listen(fd, LB_NET_BACKLOG) == -1) {
        int e = errno;

        snprintf(err, errlen, "listen: %s", strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int
lb_net_check_free(const struct sockaddr *addr, socklen_t len, int type, char *err,
                  size_t errlen)
{
    /* The same options as the real sockets but SO_REUSEPORT: with it the
     * kernel lets a bind share the address with any listener of the same
     * user that set it too; without it, a bind fails while any socket
     * listens there, whoever owns it and whatever it set (SO_REUSEADDR
     * only passes over sockets that set it too and do not listen: lb's own
     * connections and TIME_WAIT after a restart). */
    int fd = lb_net_bind(addr, len, type, false, err, errlen);

    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

uint64_t
lb_net_raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);    /* failed, ignored: keep the soft one */
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur;
}

int
lb_net_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    size_t len;
    ssize_t n;
    int fd;

    if (path == NULL || path[0] == '\0')
        return 0;
    len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sun.sun_path)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(sun.sun_path, path, len);
    if (path[0] == '@')
        sun.sun_path[0] = '\0';        /* an abstract name */
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    close(fd);
    return n < 0 ? -1 : 0;
}

void
lb_signals_block(sigset_t *old)
{
    sigset_t block;

    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &block, old);
}

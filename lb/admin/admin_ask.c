/*
 * admin_ask.c - lb -r -c FILE: asks the lb that runs with FILE to reload,
 * through its own admin port (POST /reload, with the token of FILE), and
 * says how it went. systemd's ExecReload runs it: unlike a SIGHUP, whose
 * outcome nobody sees, the answer tells a reload that failed (a bad file,
 * a port in use) from one that worked, and `systemctl reload` fails with
 * the reason.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "admin.h"
#include "core.h"

/* POST /reload answers once the reload ended, warm-up included. */
#define LB_ASK_TIMEOUT_S 120
#define LB_ASK_ANSWER_MAX 8192

/* The admin port's address as a client reaches it: a wildcard listen is
 * reached on the loopback address of its family. */
static void
lb_ask_target(const struct conf_addr *listen, struct sockaddr_storage *ss)
{
    memcpy(ss, &listen->ss, sizeof(*ss));
    if (ss->ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        if (in->sin_addr.s_addr == htonl(INADDR_ANY))
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (ss->ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        if (memcmp(&in6->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0)
            in6->sin6_addr = in6addr_loopback;
    }
}

int
lb_admin_ask_reload(const struct conf *c)
{
    const struct conf_admin *ac = &c->admin;
    struct timeval tv = { .tv_sec = LB_ASK_TIMEOUT_S };
    struct sockaddr_storage ss;
    char req[512], host[128], *answer = malloc(LB_ASK_ANSWER_MAX + 1);
    size_t got = 0;
    int fd = -1, code = 0, n;
    const char *body;

    if (answer == NULL) {
        fprintf(stderr, "lb: out of memory\n");
        return 1;
    }
    lb_ask_target(&ac->listen, &ss);
    /* Host: the address itself, which the admin port's rebinding guard
     * (allowed_hosts) always admits. */
    lb_net_addr_text((const struct sockaddr *)&ss, host, sizeof(host));
    n = snprintf(req, sizeof(req), "POST /reload HTTP/1.0\r\nHost: %s\r\n%s%s%s"
                 "Content-Length: 0\r\n\r\n", host,
                 ac->token[0] ? "Authorization: Bearer " : "", ac->token,
                 ac->token[0] ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(req)) {
        fprintf(stderr, "lb: the admin token is too long to send\n");
        goto fail;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == -1 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == -1 ||
        connect(fd, (struct sockaddr *)&ss, ac->listen.len) == -1) {
        fprintf(stderr, "lb: admin port %s: %s (is lb running with %s?)\n", ac->listen.text,
                strerror(errno), c->file);
        goto fail;
    }
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        fprintf(stderr, "lb: admin port %s: %s\n", ac->listen.text, strerror(errno));
        goto fail;
    }
    while (got < LB_ASK_ANSWER_MAX) {
        ssize_t k = recv(fd, answer + got, LB_ASK_ANSWER_MAX - got, 0);

        if (k == 0)
            break;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            fprintf(stderr, "lb: admin port %s: %s\n", ac->listen.text,
                    errno == EAGAIN ? "no answer in time" : strerror(errno));
            goto fail;
        }
        got += (size_t)k;
    }
    answer[got] = '\0';
    body = strstr(answer, "\r\n\r\n");
    if (sscanf(answer, "HTTP/1.%*d %d", &code) != 1 || body == NULL) {
        fprintf(stderr, "lb: admin port %s: not an HTTP answer\n", ac->listen.text);
        goto fail;
    }
    body += 4;
    fprintf(code == 200 ? stdout : stderr, "%s%s", body,
            body[0] && body[strlen(body) - 1] != '\n' ? "\n" : "");
    close(fd);
    free(answer);
    return code == 200 ? 0 : 1;
fail:
    if (fd >= 0)
        close(fd);
    free(answer);
    return 1;
}

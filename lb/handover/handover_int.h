/*
 * handover_int.h - what the two sides of a hand-over share, for
 * lb/handover/ only: the messages on the control socket (takeover.c) and
 * their bounds. Other parts go through handover.h.
 */
#ifndef LB_HANDOVER_INT_H
#define LB_HANDOVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "bal.h"
#include "bal_lines.h"
#include "conf.h"

struct lb_daemon;

#define LB_TAKEOVER_MSG_MAX 60000       /* under any SO_SNDBUF */
#define LB_TAKEOVER_FDS_MAX 200         /* under SCM_MAX_FD (253) */
#define LB_TAKEOVER_IO_S 5              /* each send and receive */
#define LB_TAKEOVER_WAIT_S 60           /* for the new process's "go" */

/* Bounds each blocking send and receive on fd by LB_TAKEOVER_IO_S. */
void lb_takeover_timeouts(int fd);
/* One message of len bytes with nfds descriptors attached (at most
 * LB_TAKEOVER_FDS_MAX); 0, or -1 with errno. */
int lb_takeover_send(int fd, const void *buf, size_t len, const int *fds, size_t nfds);
int lb_takeover_send_text(int fd, const char *text);
/* One message into buf (NUL-ended; at most len - 1 bytes) and its
 * descriptors into fds: its length, 0 at the peer's end, -1 on error (the
 * message's descriptors then closed). */
ssize_t lb_takeover_recv(int fd, char *buf, size_t len, int *fds, size_t *nfds);

/* A heartbeat line of the hand-over (takeover.c has its table): the
 * heartbeats that keep a server out or warning. */
struct lb_takeover_beat {
    char pool[CONF_NAME_MAX + 1], name[CONF_NAME_MAX + 1];
    enum bal_beat beat;                 /* warn or fail */
    bool is_expired;                    /* a failed one: expired */
};
extern const struct bal_line_kind lb_takeover_beat_kind;

/* The control socket a hand-over brought (taken: -1 the next time), or -1:
 * the new process listens on the old one's socket. Main. */
int lb_takeover_control_fd(struct lb_daemon *d);

#endif /* LB_HANDOVER_INT_H */

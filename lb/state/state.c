/*
 * state.c - [global] state_file: every server's health and operator state,
 * saved at exit and after each reload of the file, read at the next start,
 * so that a restart forgets neither a server that is down (it stays out
 * until rise passes) nor one an operator took out (it stays disabled or
 * drained), and an up server does not start with "the first probe
 * decides". The line format is balancer/saved.c's.
 *
 * Written whole to FILE.tmp, synced, renamed over FILE: a reader sees the
 * old file or the new one, never half of one. Read once, before the first
 * decision: a server of the config (same pool, name and address) found
 * there starts in its saved state when the file is at most
 * LB_STATE_MAX_AGE_S old; a file that is older, foreign or corrupt in any
 * line is logged and ignored as a whole (the start goes on as without it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "state.h"

/* Older than this, the saved state says more about the past than about
 * now: ten minutes covers a restart, an upgrade or a reboot. */
#define LB_STATE_MAX_AGE_S 600

static bool
lb_state_is_saved(enum bal_health_state h)
{
    return h == BAL_HEALTH_UP || h == BAL_HEALTH_DOWN || h == BAL_HEALTH_WARNING;
}

char *
lb_state_lines(struct lb_daemon *d, bool with_ephemeral, size_t *len, size_t *n)
{
    uint64_t now = lb_mono_ms();
    struct lb_text t = { 0 };

    *n = 0;
    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->gen->nservers; i++) {
        const struct lb_server *srv = d->gen->servers[i];
        const struct lb_backend *b = srv->b;
        struct bal_saved s = {
            .health = b->health.state,
            .successes = b->health.consecutive_successes,
            .failures = b->health.consecutive_failures,
            .admin = b->op.admin,
            .down_ms = b->health.state == BAL_HEALTH_DOWN && now > b->down_since_ms
                           ? now - b->down_since_ms : 0,
        };
        char *at;
        size_t k;

        if ((!lb_state_is_saved(s.health) && s.admin == BAL_ADMIN_NONE) ||
            (srv->conf->is_ephemeral && !with_ephemeral))
            continue;                   /* nothing known yet, or not kept */
        if (!lb_state_is_saved(s.health))
            s.health = BAL_HEALTH_UP;   /* the operator's state alone */
        snprintf(s.pool, sizeof(s.pool), "%s", srv->pool->conf->name);
        snprintf(s.name, sizeof(s.name), "%s", srv->conf->name);
        snprintf(s.addr, sizeof(s.addr), "%s", srv->conf->addr.text);
        if ((at = lb_text_room(&t, LB_STATE_LINE_MAX)) == NULL)
            break;
        k = bal_saved_format(at, LB_STATE_LINE_MAX, &s);
        t.len += k;
        *n += k > 0;
    }
    pthread_mutex_unlock(&d->state_lock);
    return lb_text_take(&t, len);
}

void
lb_state_save(struct lb_daemon *d)
{
    const char *path = d->gen->conf->global.state_file;
    char tmp[4096], head[64], qbuf[600], qerr[300];
    size_t n = 0, len = 0, hlen;
    char *text;
    FILE *f;
    bool ok;

    if (path[0] == '\0' || d->is_handed_over)     /* the new process's file now */
        return;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp) ||
        (f = fopen(tmp, "w")) == NULL) {
        lb_log(CONF_LOG_WARN, "state_save_failed", "file=%s error=%s",
               lb_log_quote(qbuf, sizeof(qbuf), path), lb_log_quote(qerr, sizeof(qerr),
                                                                    strerror(errno)));
        return;
    }
    text = lb_state_lines(d, false, &len, &n);
    hlen = bal_saved_format_header(head, sizeof(head), lb_wall_now());
    errno = text == NULL ? ENOMEM : 0;
    ok = text != NULL && fwrite(head, 1, hlen, f) == hlen && fwrite(text, 1, len, f) == len;
    free(text);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0) {
        lb_log(CONF_LOG_INFO, "state_saved", "file=%s servers=%zu",
               lb_log_quote(qbuf, sizeof(qbuf), path), n);
        return;
    }
    lb_log(CONF_LOG_WARN, "state_save_failed", "file=%s error=%s",
           lb_log_quote(qbuf, sizeof(qbuf), path),
           lb_log_quote(qerr, sizeof(qerr), errno ? strerror(errno) : "write failed"));
    unlink(tmp);
}

size_t
lb_state_apply(struct lb_gen *g, const struct bal_saved *saved, size_t n, bool is_handed_over)
{
    uint64_t now = lb_mono_ms();
    size_t applied = 0;

    for (size_t i = 0; i < n; i++) {
        struct lb_server *srv = lb_gen_find_server(g, saved[i].pool, saved[i].name);
        struct lb_backend *b;

        if (srv == NULL || strcmp(srv->conf->addr.text, saved[i].addr) != 0)
            continue;                   /* gone, or another server now */
        b = srv->b;
        if (srv->pool->conf->check != CONF_CHECK_NONE) {
            const struct bal_saved *s = &saved[i];
            uint64_t down_since = now > s->down_ms ? now - s->down_ms : 0;

            /* rise/fall's own rules: a saved down server needs rise passes */
            if (!bal_health_restore(&b->health, s->health, s->successes, s->failures,
                                    s->health == BAL_HEALTH_DOWN ? down_since : now)) {
                lb_log(CONF_LOG_WARN, "state_skipped", "pool=%s server=%s health=%s "
                       "successes=%u failures=%u detail=\"not a state a run of probes leaves\"",
                       s->pool, s->name, bal_health_state_name(s->health), s->successes,
                       s->failures);
                continue;
            }
            b->down_since_ms = down_since;
            b->is_handed_over = is_handed_over;
        }
        b->op.admin = saved[i].admin;
        applied++;
    }
    return applied;
}

static void
lb_state_ignored(const char *path, const char *why)
{
    char qpath[600], qwhy[700];

    lb_log(CONF_LOG_WARN, "state_ignored", "file=%s reason=%s detail=\"servers start as "
           "without it\"", lb_log_quote(qpath, sizeof(qpath), path),
           lb_log_quote(qwhy, sizeof(qwhy), why));
}

/* Reads the whole file into saved[] (malloc'd), or says why not. */
static int
lb_state_read(const char *path, struct bal_saved **out, size_t *nout, double *written_at,
              char *why, size_t whylen)
{
    char line[LB_STATE_LINE_MAX + 2], err[128];
    struct bal_saved *saved = NULL;
    size_t n = 0, cap = 0;
    int lineno = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        snprintf(why, whylen, "%s", strerror(errno));
        return errno == ENOENT ? 1 : -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);

        lineno++;
        if (len == 0 || line[len - 1] != '\n') {
            snprintf(why, whylen, "line %d: too long or not ended", lineno);
            goto fail;
        }
        line[len - 1] = '\0';
        if (memchr(line, '\0', len - 1) != NULL) {
            snprintf(why, whylen, "line %d: a NUL byte", lineno);
            goto fail;
        }
        if (lineno == 1) {
            if (bal_saved_header(line, written_at) == -1) {
                snprintf(why, whylen, "line 1: not an lb state file (lb-state 1 TIME)");
                goto fail;
            }
            continue;
        }
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            struct bal_saved *s = realloc(saved, c * sizeof(*s));

            if (s == NULL) {
                snprintf(why, whylen, "out of memory");
                goto fail;
            }
            saved = s;
            cap = c;
        }
        if (bal_saved_parse(line, &saved[n], err, sizeof(err)) == -1) {
            snprintf(why, whylen, "line %d: %s", lineno, err);
            goto fail;
        }
        n++;
    }
    if (ferror(f) || lineno == 0) {
        snprintf(why, whylen, lineno == 0 ? "empty" : "read error");
        goto fail;
    }
    fclose(f);
    *out = saved;
    *nout = n;
    return 0;
fail:
    fclose(f);
    free(saved);
    return -1;
}

void
lb_state_load(struct lb_daemon *d, struct lb_gen *g)
{
    const char *path = g->conf->global.state_file;
    struct bal_saved *saved = NULL;
    size_t n = 0, applied;
    double written_at = 0, age;
    char why[256], qbuf[600];
    int rc;

    if (path[0] == '\0')
        return;
    rc = lb_state_read(path, &saved, &n, &written_at, why, sizeof(why));
    if (rc == 1) {
        lb_log(CONF_LOG_INFO, "state_none", "file=%s", lb_log_quote(qbuf, sizeof(qbuf), path));
        return;
    }
    if (rc == -1) {
        lb_state_ignored(path, why);
        return;
    }
    age = lb_wall_now() - written_at;
    if (age > LB_STATE_MAX_AGE_S || age < -60) {
        snprintf(why, sizeof(why), "written %.0f s ago, more than %d s", age,
                 LB_STATE_MAX_AGE_S);
        lb_state_ignored(path, age < 0 ? "written in the future (clock?)" : why);
        free(saved);
        return;
    }
    applied = lb_state_apply(g, saved, n, false);
    lb_log(CONF_LOG_INFO, "state_loaded", "file=%s age_s=%.0f saved=%zu applied=%zu",
           lb_log_quote(qbuf, sizeof(qbuf), path), age, n, applied);
    free(saved);
}

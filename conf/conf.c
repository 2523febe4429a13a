/*
 * conf.c - conf_load: read the file, parse it, merge defaults, check, and
 * hand back either a struct conf or every problem found.
 *
 * The steps, in order: read the whole file (so NUL bytes and the size can
 * be checked, which fgets cannot; again when a write overlapped the read),
 * refuse binary data, let conf_ini.c fill
 * struct conf through inih, fill in defaults in one merge step, then run
 * the whole-file checks of conf_check.c. Each step reports what it finds
 * and the next ones still run, so one pass reports everything; a binary or
 * unreadable file stops early, since its lines would only add noise.
 * conf_load_text runs the same steps on text already in memory; the file
 * loader is the read followed by exactly those steps.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "conf_keys.h"
#include "conf_parse.h"
#include "conf_value.h"

/* Far above any real config; stops "-c /dev/zero" from eating memory. */
#define CONF_FILE_MAX (16u * 1024 * 1024)
/* Reads of a file that keeps changing under them before conf_load gives
 * up: each is a few microseconds for a small file. */
#define CONF_READ_TRIES 3

static void conf_parse_init(struct conf_parse *p, const char *name);
static void conf_parse_text(struct conf_parse *p);
static int conf_parse_end(struct conf_parse *p, struct conf **out,
                          char **errors);
static int conf_read_file(struct conf_parse *p);
static int conf_check_text(struct conf_parse *p);
static void conf_merge(struct conf_parse *p);
static void conf_pool_resolve_servers(struct conf_pool *pool, size_t from);
static void conf_resolve_workers(struct conf *c);
static int conf_error_cmp(const void *a, const void *b);
static char *conf_errors_join(struct conf_parse *p);
static void conf_parse_fini(struct conf_parse *p);

/* One version of a file: a write changes its size or its mtime (kept to
 * the nanosecond, though the kernel's clock for it ticks a few ms at a
 * time: the size is what tells two writes of one tick apart), a rename
 * over the path its inode. */
struct conf_stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

static void
conf_stamp_of(const struct stat *st, struct conf_stamp *out)
{
    out->dev = st->st_dev;
    out->ino = st->st_ino;
    out->size = st->st_size;
    out->mtime = st->st_mtim;
}

static bool
conf_stamp_equal(const struct conf_stamp *a, const struct conf_stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* The stamp of what path names now; -1 when it cannot be stat'ed. */
static int
conf_stamp_path(const char *path, struct conf_stamp *out)
{
    struct stat st;

    if (stat(path, &st) == -1)
        return -1;
    conf_stamp_of(&st, out);
    return 0;
}

int
conf_load(const char *path, struct conf **out, char **errors)
{
    struct conf_parse p;

    conf_parse_init(&p, path);
    if (!p.oom && conf_read_file(&p) == 0)
        conf_parse_text(&p);
    return conf_parse_end(&p, out, errors);
}

int
conf_load_text(const char *name, const char *text, size_t len,
               struct conf **out, char **errors)
{
    struct conf_parse p;

    conf_parse_init(&p, name);
    /* A copy with a NUL after it, as the file reader leaves its buffer. */
    if (!p.oom && (p.buf = malloc(len + 1)) == NULL)
        p.oom = true;
    if (!p.oom) {
        if (len > 0)            /* text may be NULL when len is 0 */
            memcpy(p.buf, text, len);
        p.buf[len] = '\0';
        p.len = len;
        conf_parse_text(&p);
    }
    return conf_parse_end(&p, out, errors);
}

static void
conf_parse_init(struct conf_parse *p, const char *name)
{
    memset(p, 0, sizeof(*p));
    p->file = name;
    p->c = calloc(1, sizeof(*p->c));
    if (p->c == NULL || (p->c->file = strdup(name)) == NULL)
        p->oom = true;
}

/* Every step after the read, on p->buf. */
static void
conf_parse_text(struct conf_parse *p)
{
    if (conf_check_text(p) != 0)
        return;
    conf_ini_parse(p);
    if (!p->has_content)
        conf_error(p, 1, "file is empty (expected sections such as "
                   "[frontend NAME] and [pool NAME])");
    conf_merge(p);
    conf_check(p);
}

/* Hands the result to the caller and frees the rest: conf_load's return. */
static int
conf_parse_end(struct conf_parse *p, struct conf **out, char **errors)
{
    int rc = -1;

    *out = NULL;
    *errors = NULL;
    if (p->nerrors == 0 && p->nerrors_dropped == 0 && !p->oom) {
        conf_resolve_workers(p->c);
        *out = p->c;
        p->c = NULL;
        rc = 0;
    } else {
        *errors = conf_errors_join(p);
    }
    conf_parse_fini(p);
    return rc;
}

/* How long until a file stamped st has not changed for quiet_ms: 0 when
 * it already has. An mtime in the future (a clock set back, a copy that
 * kept its times) is not a write in progress, which would stamp it now:
 * 0 too, or the wait would never end. */
static uint64_t
conf_quiet_left_ms(const struct conf_stamp *st, unsigned quiet_ms)
{
    struct timespec now;
    int64_t age_ns;

    clock_gettime(CLOCK_REALTIME, &now);
    age_ns = (int64_t)(now.tv_sec - st->mtime.tv_sec) * 1000000000 +
             (now.tv_nsec - st->mtime.tv_nsec);
    if (age_ns < 0 || age_ns >= (int64_t)quiet_ms * 1000000)
        return 0;
    return ((uint64_t)quiet_ms * 1000000 - (uint64_t)age_ns + 999999) / 1000000;
}

int
conf_load_settled(const char *path, unsigned quiet_ms, struct conf **out, char **errors,
                  uint64_t *retry_ms)
{
    struct conf_stamp before, after;
    size_t size;
    int rc;

    *out = NULL;
    *errors = NULL;
    *retry_ms = 0;
    if (conf_stamp_path(path, &before) == -1)
        return conf_load(path, out, errors);        /* it says why */
    *retry_ms = conf_quiet_left_ms(&before, quiet_ms);
    if (*retry_ms == 0) {
        rc = conf_load(path, out, errors);
        /* Between the stat above and the open, a writer may have truncated
         * the file and paused: the same stamp after the load proves the
         * load read the quiet version. */
        if (conf_stamp_path(path, &after) == 0 && conf_stamp_equal(&before, &after))
            return rc;
        conf_free(*out);
        free(*errors);
        *out = NULL;
        *retry_ms = quiet_ms ? quiet_ms : 1;        /* it was written just now */
    }
    size = strlen(path) + 256;
    *errors = malloc(size);
    if (*errors != NULL)
        snprintf(*errors, size, "%s: the file is still being written (it changed less "
                 "than %u ms before the last read): write the new version elsewhere "
                 "and rename it into place\n", path, quiet_ms);
    return 1;
}

static bool
conf_type_is_string(enum conf_type t)
{
    return t == CONF_TYPE_STRING || t == CONF_TYPE_WORD || t == CONF_TYPE_PATH ||
           t == CONF_TYPE_NAME;
}

/* Frees the string fields of obj that kind's key table names: conf_free
 * and conf_dup both go by the table, so a new string key needs no code. */
static void
conf_free_strings(enum conf_section_kind kind, void *obj)
{
    size_t nkeys;
    const struct conf_key *keys = conf_keys_of(kind, &nkeys);

    for (size_t i = 0; i < nkeys; i++) {
        if (conf_type_is_string(keys[i].type))
            free(*(char **)((char *)obj + keys[i].offset));
    }
}

void
conf_free(struct conf *c)
{
    size_t i, j;

    if (c == NULL)
        return;
    free(c->file);
    conf_free_strings(CONF_SECTION_GLOBAL, &c->global);
    conf_free_strings(CONF_SECTION_ADMIN, &c->admin);
    for (i = 0; i < c->nfrontends; i++) {
        struct conf_routes *r = &c->frontends[i].routes;

        for (j = 0; j < r->n; j++) {
            free(r->v[j].pattern);
            free(r->v[j].pool_name);
        }
        free(r->v);
        free(c->frontends[i].name);
        conf_free_strings(CONF_SECTION_FRONTEND, &c->frontends[i]);
    }
    free(c->frontends);
    for (i = 0; i < c->npools; i++) {
        struct conf_pool *pool = &c->pools[i];
        for (j = 0; j < pool->nservers; j++) {
            free(pool->servers[j].name);
            free(pool->servers[j].addr.text);
        }
        free(pool->servers);
        free(pool->name);
        conf_free_strings(CONF_SECTION_POOL, pool);
    }
    free(c->pools);
    free(c);
}

/* Replaces every string field of obj that kind's key table names with a
 * copy of its own (obj was copied by value). -1 when out of memory: the
 * fields not copied yet are set to NULL, so conf_free frees only copies. */
static int
conf_dup_strings(enum conf_section_kind kind, void *obj)
{
    size_t nkeys;
    const struct conf_key *keys = conf_keys_of(kind, &nkeys);
    int rc = 0;

    for (size_t i = 0; i < nkeys; i++) {
        char **field = (char **)((char *)obj + keys[i].offset);

        if (!conf_type_is_string(keys[i].type))
            continue;
        if (rc == 0 && *field != NULL && (*field = strdup(*field)) == NULL)
            rc = -1;
        else if (rc != 0)
            *field = NULL;
    }
    return rc;
}

static char *
conf_strdup_or_null(const char *s, bool *oom)
{
    char *copy = s != NULL ? strdup(s) : NULL;

    if (s != NULL && copy == NULL)
        *oom = true;
    return copy;
}

/* d holds src's routes by value: gives it copies of its own, so that
 * conf_free frees only copies (-1 when out of memory: what was not copied
 * is NULL). */
static int
conf_dup_routes(struct conf_routes *d, const struct conf_routes *src)
{
    bool oom = false;

    d->v = NULL;
    d->n = 0;
    if (src->n == 0)
        return 0;
    if ((d->v = calloc(src->n, sizeof(*d->v))) == NULL)
        return -1;
    for (size_t i = 0; i < src->n; i++) {
        d->v[i] = src->v[i];
        d->v[i].pattern = conf_strdup_or_null(src->v[i].pattern, &oom);
        d->v[i].pool_name = conf_strdup_or_null(src->v[i].pool_name, &oom);
        d->n++;
    }
    return oom ? -1 : 0;
}

struct conf *
conf_dup(const struct conf *c)
{
    struct conf *d = malloc(sizeof(*d));
    bool oom = false;

    if (d == NULL)
        return NULL;
    /* From here on every pointer of d is a copy of its own or NULL, so
     * that conf_free(d) may run at any point. */
    *d = *c;
    d->frontends = NULL;
    d->pools = NULL;
    d->nfrontends = d->npools = 0;
    oom = conf_dup_strings(CONF_SECTION_GLOBAL, &d->global) != 0;
    oom |= conf_dup_strings(CONF_SECTION_ADMIN, &d->admin) != 0;
    d->file = conf_strdup_or_null(c->file, &oom);
    d->frontends = calloc(c->nfrontends ? c->nfrontends : 1, sizeof(*d->frontends));
    d->pools = calloc(c->npools ? c->npools : 1, sizeof(*d->pools));
    if (oom || d->frontends == NULL || d->pools == NULL) {
        conf_free(d);
        return NULL;
    }
    for (size_t i = 0; i < c->nfrontends && !oom; i++) {
        d->frontends[i] = c->frontends[i];
        d->nfrontends++;
        d->frontends[i].name = conf_strdup_or_null(c->frontends[i].name, &oom);
        oom |= conf_dup_strings(CONF_SECTION_FRONTEND, &d->frontends[i]) != 0;
        oom |= conf_dup_routes(&d->frontends[i].routes, &c->frontends[i].routes) != 0;
    }
    for (size_t i = 0; i < c->npools && !oom; i++) {
        const struct conf_pool *src = &c->pools[i];
        struct conf_pool *dst = &d->pools[i];

        *dst = *src;
        d->npools++;
        dst->name = conf_strdup_or_null(src->name, &oom);
        /* The capacity conf_set_server counts on: the count rounded up to
         * a power of two (it grows only when the count reaches one). A
         * copy of 3 servers sized 3 took a fourth (an admin API member)
         * past its end. */
        size_t cap = 1;

        while (cap < src->nservers)
            cap *= 2;
        dst->servers = malloc(cap * sizeof(*dst->servers));
        dst->nservers = 0;
        oom |= dst->servers == NULL;
        oom |= conf_dup_strings(CONF_SECTION_POOL, dst) != 0;
        for (size_t j = 0; j < src->nservers && !oom; j++) {
            dst->servers[j] = src->servers[j];
            dst->servers[j].name = conf_strdup_or_null(src->servers[j].name, &oom);
            dst->servers[j].addr.text = conf_strdup_or_null(src->servers[j].addr.text, &oom);
            dst->nservers++;
        }
    }
    if (oom) {
        conf_free(d);
        return NULL;
    }
    return d;
}

int
conf_pool_add_server(struct conf *c, size_t pool_index, const char *text,
                     enum conf_source source, char *err, size_t errlen)
{
    struct conf_pool *pool = &c->pools[pool_index];
    int kserver = conf_key_find(CONF_SECTION_POOL, "server");
    const struct conf_key *keys;
    size_t nkeys;

    keys = conf_keys_of(CONF_SECTION_POOL, &nkeys);
    if (conf_key_set(&keys[kserver], pool, text, 0, err, errlen) != 0)
        return -1;
    pool->servers[pool->nservers - 1].source = source;
    /* The pool is complete: its send_proxy is known already. */
    conf_pool_resolve_servers(pool, pool->nservers - 1);
    return 0;
}

/* Servers from index from on that have no send_proxy= of their own take
 * the pool's: a struct conf handed out holds each server's own version. */
static void
conf_pool_resolve_servers(struct conf_pool *pool, size_t from)
{
    for (size_t i = from; i < pool->nservers; i++)
        if (pool->servers[i].send_proxy == CONF_PROXY_POOL)
            pool->servers[i].send_proxy = pool->send_proxy;
}

void
conf_error(struct conf_parse *p, int line, const char *fmt, ...)
{
    struct conf_error *e;
    char msg[1024];
    size_t size;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    /* A text file of garbage would otherwise give one message per line. */
    if (p->nerrors == CONF_ERRORS_MAX) {
        p->nerrors_dropped++;
        return;
    }
    if (p->nerrors == p->errors_cap) {
        size_t ncap = p->errors_cap ? p->errors_cap * 2 : 8;
        e = realloc(p->errors, ncap * sizeof(*e));
        if (e == NULL) {
            p->oom = true;
            return;
        }
        p->errors = e;
        p->errors_cap = ncap;
    }
    e = &p->errors[p->nerrors];
    size = strlen(p->file) + strlen(msg) + 16;
    e->text = malloc(size);
    if (e->text == NULL) {
        p->oom = true;
        return;
    }
    if (line > 0)
        snprintf(e->text, size, "%s:%d: %s", p->file, line, msg);
    else
        snprintf(e->text, size, "%s: %s", p->file, msg);
    e->line = line;
    e->seq = p->nerrors++;
}

void *
conf_parse_object(struct conf_parse *p, int kind, size_t index,
                  struct conf_lines **lines)
{
    switch (kind) {
    case CONF_SECTION_GLOBAL:
        *lines = &p->single[kind];
        return &p->c->global;
    case CONF_SECTION_HEALTH:
        *lines = &p->single[kind];
        return &p->c->health;
    case CONF_SECTION_ADMIN:
        *lines = &p->single[kind];
        return &p->c->admin;
    case CONF_SECTION_FRONTEND:
        *lines = &p->frontend_lines[index];
        return &p->c->frontends[index];
    default:
        *lines = &p->pool_lines[index];
        return &p->c->pools[index];
    }
}

/* Reads the file whole into p->buf (p->len bytes). *stable tells whether
 * the bytes read are one version of the file: the same stamp when it was
 * opened, after the last read (the open file), and then for the path (not
 * renamed over meanwhile), and as many bytes as its size said. */
static int
conf_read_once(struct conf_parse *p, bool *stable)
{
    char ebuf[128];
    size_t cap = p->cap, n;
    struct conf_stamp opened, read_end, path_end;
    FILE *f;
    int err = 0;

    struct stat st = { 0 };
    int fd;

    p->len = 0;
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, and a
     * reload would hang the main thread. Only regular files are read. */
    fd = open(p->file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        conf_error(p, 0, "cannot open: %s",
                   conf_strerror(errno, ebuf, sizeof(ebuf)));
        return -1;
    }
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        int e = errno;

        conf_error(p, 0, "cannot read: %s",
                   S_ISDIR(st.st_mode) ? conf_strerror(EISDIR, ebuf, sizeof(ebuf))
                   : S_ISREG(st.st_mode) ? conf_strerror(e, ebuf, sizeof(ebuf))
                   : "not a regular file");
        close(fd);
        return -1;
    }
    conf_stamp_of(&st, &opened);
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    f = fdopen(fd, "rb");
    if (f == NULL) {
        conf_error(p, 0, "cannot open: %s",
                   conf_strerror(errno, ebuf, sizeof(ebuf)));
        close(fd);
        return -1;
    }
    do {
        if (p->len > CONF_FILE_MAX) {
            conf_error(p, 0, "file is too large (more than %u MiB)",
                       CONF_FILE_MAX / (1024 * 1024));
            fclose(f);
            return -1;
        }
        if (p->len == cap) {
            char *grown;
            cap = cap ? cap * 2 : 4096;
            /* + 1: room for a terminating NUL */
            grown = realloc(p->buf, cap + 1);
            if (grown == NULL) {
                p->oom = true;
                fclose(f);
                return -1;
            }
            p->buf = grown;
            p->cap = cap;
        }
        n = fread(p->buf + p->len, 1, cap - p->len, f);
        p->len += n;
    } while (n != 0);
    if (ferror(f))
        err = errno != 0 ? errno : EIO;
    *stable = fstat(fileno(f), &st) == 0;
    fclose(f);
    if (err != 0) {
        /* e.g. EISDIR: fopen() opens a directory, reading it fails */
        conf_error(p, 0, "cannot read: %s",
                   conf_strerror(err, ebuf, sizeof(ebuf)));
        return -1;
    }
    conf_stamp_of(&st, &read_end);
    *stable = *stable && conf_stamp_equal(&opened, &read_end) &&
              conf_stamp_path(p->file, &path_end) == 0 &&
              conf_stamp_equal(&opened, &path_end) &&
              p->len == (size_t)opened.size;
    p->buf[p->len] = '\0';
    return 0;
}

/* A file written in place while it is read would give a prefix of the new
 * version, or of the old one cut where the writer truncated it: parsed, it
 * may even be valid (a pool short of its last servers). Such a read is
 * thrown away and the file read again; a writer still at work after a few
 * tries is refused, not waited for (a reload waits with conf_load_settled). */
static int
conf_read_file(struct conf_parse *p)
{
    for (int tries = 1;; tries++) {
        bool stable = false;

        if (conf_read_once(p, &stable) == -1)
            return -1;
        if (stable)
            return 0;
        if (tries == CONF_READ_TRIES) {
            conf_error(p, 0, "the file changed while it was read (%d reads): "
                       "write the new version elsewhere and rename it into "
                       "place", tries);
            return -1;
        }
    }
}

/* A binary file would give one confusing message per line; one that says
 * where the binary data starts is more useful. */
static int
conf_check_text(struct conf_parse *p)
{
    unsigned char byte;
    size_t col;
    int line;

    if (!conf_find_binary(p->buf, p->len, &line, &col, &byte))
        return 0;
    conf_error(p, line, "binary data (byte 0x%02x at column %zu)", byte, col);
    return -1;
}

/* The defaults that follow another key of the pool, once the table's are
 * in: they depend on whether the key was set (lines), which the table's
 * one default per key cannot say.
 *
 * check_timeout, unset, is at most check_interval: HAProxy uses "inter"
 * as the whole check's timeout when "timeout check" is not set, so
 * check_interval = 200ms alone gives 200 ms probes, not an error about the
 * 1s default. A check_timeout written in the file is kept as written, and
 * conf_check refuses it when it is longer than the interval.
 *
 * The agent's interval and timeout, unset (0), are the check's, the
 * timeout capped at the agent's interval in the same way.
 *
 * A server line without send_proxy= takes the pool's, known only now: the
 * pool's send_proxy line may come after its servers. */
static void
conf_merge_pool(struct conf_pool *pool, const struct conf_lines *l)
{
    int ktimeout = conf_key_find(CONF_SECTION_POOL, "check_timeout");
    int kinterval = conf_key_find(CONF_SECTION_POOL, "check_interval");
    int kdelete = conf_key_find(CONF_SECTION_POOL, "ephemeral_delete_after");

    /* unset, the deletion is never before the server is out of rotation */
    if (l->key[kdelete] == 0 && pool->ephemeral_delete_after_ms < pool->heartbeat_ttl_ms)
        pool->ephemeral_delete_after_ms = pool->heartbeat_ttl_ms;
    if (l->key[ktimeout] == 0 && !l->bad[kinterval] &&
        pool->check_timeout_ms > pool->check_interval_ms)
        pool->check_timeout_ms = pool->check_interval_ms;
    if (pool->agent_interval_ms == 0)
        pool->agent_interval_ms = pool->check_interval_ms;
    if (pool->agent_timeout_ms == 0)
        pool->agent_timeout_ms = pool->check_timeout_ms < pool->agent_interval_ms
                                     ? pool->check_timeout_ms : pool->agent_interval_ms;
    conf_pool_resolve_servers(pool, 0);
}

/* Fills in the defaults of every key a section did not set, sections never
 * written included: [global] may be missing from the file and still has its
 * defaults. A key set to a rejected value keeps its zero: the file fails
 * anyway, and the checks skip such keys. */
static void
conf_merge(struct conf_parse *p)
{
    struct conf_lines *lines;
    char err[512];
    size_t i;
    int kind;

    for (kind = 0; kind < CONF_SECTION_KINDS; kind++) {
        size_t n = kind == CONF_SECTION_FRONTEND ? p->c->nfrontends
                 : kind == CONF_SECTION_POOL ? p->c->npools : 1;
        for (i = 0; i < n; i++) {
            void *obj = conf_parse_object(p, kind, i, &lines);
            if (conf_keys_merge(kind, obj, lines->key, err, sizeof(err)) != 0)
                conf_error(p, 0, "%s", err);
            else if (kind == CONF_SECTION_POOL)
                conf_merge_pool(obj, lines);
        }
    }
}

unsigned
conf_cpu_count(void)
{
    cpu_set_t set;
    long n;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    else
        n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (unsigned)n : 1;
}

/* workers = 0: one per CPU this process may run on, as HAProxy sizes
 * nbthread: under taskset or a container's cpuset that is fewer than the
 * machine has, and more threads than CPUs only take turns. */
static void
conf_resolve_workers(struct conf *c)
{
    if (c->global.workers == 0)
        c->global.workers = conf_cpu_count();
}

static int
conf_error_cmp(const void *a, const void *b)
{
    const struct conf_error *x = a, *y = b;

    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The errors sorted by line, one per line, each ending in '\n'. NULL only
 * when even that cannot be allocated. */
static char *
conf_errors_join(struct conf_parse *p)
{
    char tail[256] = "";
    size_t i, size = 1, used = 0;
    char *s;

    qsort(p->errors, p->nerrors, sizeof(*p->errors), conf_error_cmp);
    if (p->nerrors_dropped != 0)
        snprintf(tail, sizeof(tail), "%s: %zu more problems not shown\n",
                 p->file, p->nerrors_dropped);
    else if (p->oom)
        snprintf(tail, sizeof(tail), "%s: out of memory\n", p->file);
    for (i = 0; i < p->nerrors; i++)
        size += strlen(p->errors[i].text) + 1;
    size += strlen(tail);
    s = malloc(size);
    if (s == NULL)
        return NULL;
    for (i = 0; i < p->nerrors; i++)
        used += (size_t)snprintf(s + used, size - used, "%s\n",
                                 p->errors[i].text);
    snprintf(s + used, size - used, "%s", tail);
    return s;
}

static void
conf_parse_fini(struct conf_parse *p)
{
    size_t i;

    for (i = 0; i < p->nerrors; i++)
        free(p->errors[i].text);
    free(p->errors);
    free(p->buf);
    free(p->frontend_lines);
    free(p->pool_lines);
    conf_free(p->c);
}

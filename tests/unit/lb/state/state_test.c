/* Tests lb/state/state.c on built generations: lb_state_lines writes one
 * line for every server whose state is known (a probe's verdict, an
 * operator's action, no check at all) and none for a server still waiting
 * for its first probe; lb_state_apply gives those states back to the
 * servers of a fresh start that have the same pool, name and address, so
 * that a restart forgets neither a server that is down nor one an operator
 * took out, and a pool without checks takes only the operator's state; the
 * state file round-trips through lb_state_save and lb_state_load, and a
 * file that is corrupt in one line, too old or from the future is ignored
 * as a whole. */
#include <sys/stat.h>

#include "check.h"
#include "lb/lb_fixture.h"

static char dir[64];
static char path[128];

/* web: checked (fall 3, rise 2); api: no check. */
static char conf_text[1024];
static char moved_text[1024];        /* the same, web's c on another port */

static void
make_texts(void)
{
    static const char fmt[] =
        "[global]\nworkers = 1\nstate_file = %s\n"
        "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
        "[pool web]\ncheck = tcp\nfall = 3\nrise = 2\n"
        "server = a 127.0.0.1:9001\n"
        "server = b 127.0.0.1:9002\n"
        "server = c 127.0.0.1:%d\n"
        "server = d 127.0.0.1:9004\n"
        "[pool api]\ncheck = none\n"
        "server = x 127.0.0.1:9101\n";

    snprintf(conf_text, sizeof(conf_text), fmt, path, 9003);
    snprintf(moved_text, sizeof(moved_text), fmt, path, 9013);
}

/* a down by three failed probes, b drained by the operator (before any
 * probe), c up by two passes, d never probed, x (no check) disabled. */
static void
run_first_life(struct fx *f)
{
    fx_start(f, conf_text);
    for (int i = 0; i < 3; i++)
        fx_probe(f, fx_server(f, "web", "a"), false, "connect: connection refused");
    fx_probe(f, fx_server(f, "web", "c"), true, "");
    fx_probe(f, fx_server(f, "web", "c"), true, "");
    pthread_mutex_lock(&f->d.state_lock);
    lb_server_set_admin(&f->d, fx_server(f, "web", "b"), BAL_ADMIN_DRAIN);
    lb_server_set_admin(&f->d, fx_server(f, "api", "x"), BAL_ADMIN_DISABLE);
    pthread_mutex_unlock(&f->d.state_lock);
}

static bool
in_rotation(struct fx *f, const char *pool, const char *name)
{
    const struct lb_server *s = fx_server(f, pool, name);

    return bal_server_in_rotation(s->pool->bal, s->index);
}

/* lines of text into saved[]: how many parsed (-1 when one did not) */
static int
parse_lines(char *text, size_t len, struct bal_saved *saved, int max)
{
    int n = 0;
    char err[128];

    for (char *line = text; line < text + len && n < max;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));

        if (nl == NULL)
            return -1;                  /* every line ends in "\n" */
        *nl = '\0';
        if (bal_saved_parse(line, &saved[n], err, sizeof(err)) != 0) {
            fprintf(stderr, "line \"%s\": %s\n", line, err);
            return -1;
        }
        n++;
        line = nl + 1;
    }
    return n;
}

static const struct bal_saved *
saved_of(const struct bal_saved *saved, int n, const char *pool, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(saved[i].pool, pool) == 0 && strcmp(saved[i].name, name) == 0)
            return &saved[i];
    return NULL;
}

static void
test_lines(void)
{
    struct fx f;
    struct bal_saved saved[8];
    const struct bal_saved *a, *b, *c, *x;
    size_t len, n;
    char *text;
    int parsed;

    fx_start(&f, conf_text);
    /* a fresh start knows only the unchecked x: up */
    text = lb_state_lines(&f.d, true, &len, &n);
    CHECK(text != NULL);
    CHECK_EQ_INT(n, 1);
    CHECK(text != NULL && strstr(text, " api x 127.0.0.1:9101 ") != NULL);
    free(text);
    fx_stop(&f);

    run_first_life(&f);
    CHECK(!in_rotation(&f, "web", "a"));
    CHECK(!in_rotation(&f, "web", "b"));
    CHECK(!in_rotation(&f, "api", "x"));
    CHECK(in_rotation(&f, "web", "c"));
    text = lb_state_lines(&f.d, true, &len, &n);
    CHECK(text != NULL);
    CHECK_EQ_INT(n, 4);                 /* not d: nothing known of it */
    parsed = text != NULL ? parse_lines(text, len, saved, 8) : -1;
    CHECK_EQ_INT(parsed, 4);
    a = saved_of(saved, parsed, "web", "a");
    b = saved_of(saved, parsed, "web", "b");
    c = saved_of(saved, parsed, "web", "c");
    x = saved_of(saved, parsed, "api", "x");
    CHECK(a != NULL && b != NULL && c != NULL && x != NULL);
    CHECK(saved_of(saved, parsed, "web", "d") == NULL);
    if (a != NULL) {
        CHECK_EQ_INT(a->health, BAL_HEALTH_DOWN);
        CHECK_EQ_INT(a->failures, 3);
        CHECK_EQ_INT(a->admin, BAL_ADMIN_NONE);
        CHECK_EQ_STR(a->addr, "127.0.0.1:9001");
        CHECK(a->down_ms < 1000);       /* went down just now */
    }
    if (b != NULL) {
        CHECK_EQ_INT(b->admin, BAL_ADMIN_DRAIN);
        CHECK_EQ_INT(b->health, BAL_HEALTH_UP);     /* the operator's state alone */
    }
    if (c != NULL) {
        CHECK_EQ_INT(c->health, BAL_HEALTH_UP);
        CHECK_EQ_INT(c->successes, 2);
    }
    if (x != NULL)
        CHECK_EQ_INT(x->admin, BAL_ADMIN_DISABLE);
    free(text);
    fx_stop(&f);
}

/* The lines of one life applied to the next start's generation, before
 * its first decision. */
static void
test_apply(void)
{
    struct fx f, g;
    struct bal_saved saved[8];
    size_t len, n, applied;
    char *text;
    int parsed;
    uint64_t a_down_since;
    struct lb_backend *a;

    run_first_life(&f);
    a_down_since = fx_server(&f, "web", "a")->b->down_since_ms;
    text = lb_state_lines(&f.d, true, &len, &n);
    parsed = text != NULL ? parse_lines(text, len, saved, 8) : -1;
    free(text);
    fx_stop(&f);
    CHECK_EQ_INT(parsed, 4);
    if (parsed != 4)
        return;

    /* x's line says down: a pool without checks takes the operator's
     * state only, its health is always up */
    for (int i = 0; i < parsed; i++)
        if (strcmp(saved[i].name, "x") == 0)
            saved[i].health = BAL_HEALTH_DOWN;

    fx_build(&g, moved_text);
    applied = lb_state_apply(g.d.gen, saved, (size_t)parsed, false);
    CHECK_EQ_INT(applied, 3);           /* c moved: another server now */
    a = fx_server(&g, "web", "a")->b;
    CHECK_EQ_INT(a->health.state, BAL_HEALTH_DOWN);
    CHECK_EQ_INT(a->health.consecutive_failures, 3);
    CHECK_EQ_INT(a->health.consecutive_alive, 0);
    /* the same monotonic clock here: its failing streak began when it did,
     * give or take the time from the lines to their applying */
    CHECK(a->down_since_ms >= a_down_since && a->down_since_ms - a_down_since < 1000);
    CHECK(!a->is_handed_over);
    CHECK_EQ_INT(fx_server(&g, "web", "b")->b->op.admin, BAL_ADMIN_DRAIN);
    CHECK_EQ_INT(fx_server(&g, "web", "c")->b->health.state, BAL_HEALTH_STARTING);
    CHECK_EQ_INT(fx_server(&g, "web", "d")->b->health.state, BAL_HEALTH_STARTING);
    CHECK_EQ_INT(fx_server(&g, "api", "x")->b->op.admin, BAL_ADMIN_DISABLE);
    CHECK_EQ_INT(fx_server(&g, "api", "x")->b->health.state, BAL_HEALTH_UP);

    /* the first decision: down and operator states stay out, the rest in */
    fx_decide(&g);
    CHECK(!in_rotation(&g, "web", "a"));
    CHECK(!in_rotation(&g, "web", "b"));
    CHECK(!in_rotation(&g, "api", "x"));
    CHECK(in_rotation(&g, "web", "c"));
    CHECK(in_rotation(&g, "web", "d"));
    /* a needs rise (2) passes to come back, not one */
    fx_probe(&g, fx_server(&g, "web", "a"), true, "");
    CHECK(!in_rotation(&g, "web", "a"));
    fx_probe(&g, fx_server(&g, "web", "a"), true, "");
    CHECK(in_rotation(&g, "web", "a"));
    fx_stop(&g);

    /* from a hand-over, the applied servers are marked as known */
    fx_build(&g, conf_text);
    CHECK_EQ_INT(lb_state_apply(g.d.gen, saved, (size_t)parsed, true), 4);
    CHECK(fx_server(&g, "web", "a")->b->is_handed_over);
    CHECK(!fx_server(&g, "web", "d")->b->is_handed_over);
    fx_stop(&g);
}

static void
write_file(const char *text)
{
    FILE *fp = fopen(path, "w");

    if (fp == NULL || fputs(text, fp) == EOF || fclose(fp) != 0)
        fx_die(path, "cannot write");
}

static char *
read_file(void)
{
    static char buf[4096];
    FILE *fp = fopen(path, "r");
    size_t n;

    if (fp == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return buf;
}

/* lb_state_save at exit, lb_state_load at the next start. */
static void
test_file_round_trip(void)
{
    struct fx f, g;
    char tmp[160], *text;
    double written_at = 0;
    struct stat st;

    unlink(path);
    run_first_life(&f);
    f.d.is_handed_over = true;          /* the new process's file: not written */
    lb_state_save(&f.d);
    CHECK(stat(path, &st) != 0);
    f.d.is_handed_over = false;
    lb_state_save(&f.d);
    fx_stop(&f);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    CHECK(stat(tmp, &st) != 0);         /* renamed over the file */
    text = read_file();
    CHECK(text != NULL);
    if (text == NULL)
        return;
    {
        char head[64];

        sscanf(text, "%63[^\n]", head);
        CHECK_EQ_INT(bal_saved_header(head, &written_at), 0);
        CHECK(written_at > lb_wall_now() - 60 && written_at <= lb_wall_now() + 1);
    }

    fx_build(&g, conf_text);
    lb_state_load(&g.d, g.d.gen);
    fx_decide(&g);
    CHECK_EQ_INT(fx_server(&g, "web", "a")->b->health.state, BAL_HEALTH_DOWN);
    CHECK_EQ_INT(fx_server(&g, "web", "b")->b->op.admin, BAL_ADMIN_DRAIN);
    CHECK_EQ_INT(fx_server(&g, "web", "c")->b->health.state, BAL_HEALTH_UP);
    CHECK_EQ_INT(fx_server(&g, "api", "x")->b->op.admin, BAL_ADMIN_DISABLE);
    CHECK(!in_rotation(&g, "web", "a"));
    CHECK(in_rotation(&g, "web", "c"));
    fx_stop(&g);
}

/* A file that cannot be trusted whole is not trusted at all: the start
 * goes on as without it. */
static void
test_file_ignored(void)
{
    char text[1024];
    const char *line_a = "server web a 127.0.0.1:9001 health=down successes=0 failures=3 "
                         "admin=none down_ms=100\n";
    const char *line_b = "server web b 127.0.0.1:9002 health=up successes=2 failures=0 "
                         "admin=drain down_ms=0\n";
    struct {
        const char *why;
        double age_s;
        const char *extra;
    } cases[] = {
        { "good (the control)", 5, "" },
        { "a corrupt line after good ones", 5, "server web c 127.0.0.1:9003 health=sick\n" },
        { "older than 10 minutes", 700, "" },
        { "written in the future", -3600, "" },
        { "not a state file", 5, NULL },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fx g;
        bool is_good = i == 0;

        if (cases[i].extra == NULL)
            snprintf(text, sizeof(text), "lb-state 2 %.3f\n%s%s", lb_wall_now(), line_a, line_b);
        else
            snprintf(text, sizeof(text), "lb-state 1 %.3f\n%s%s%s",
                     lb_wall_now() - cases[i].age_s, line_a, line_b, cases[i].extra);
        write_file(text);
        fx_build(&g, conf_text);
        lb_state_load(&g.d, g.d.gen);
        if (is_good) {
            CHECK_EQ_INT(fx_server(&g, "web", "a")->b->health.state, BAL_HEALTH_DOWN);
            CHECK_EQ_INT(fx_server(&g, "web", "b")->b->op.admin, BAL_ADMIN_DRAIN);
        } else {
            if (fx_server(&g, "web", "a")->b->health.state != BAL_HEALTH_STARTING ||
                fx_server(&g, "web", "b")->b->op.admin != BAL_ADMIN_NONE)
                fprintf(stderr, "case: %s\n", cases[i].why);
            CHECK_EQ_INT(fx_server(&g, "web", "a")->b->health.state, BAL_HEALTH_STARTING);
            CHECK_EQ_INT(fx_server(&g, "web", "b")->b->op.admin, BAL_ADMIN_NONE);
        }
        fx_stop(&g);
    }

    /* no file: a first start, nothing applied */
    unlink(path);
    {
        struct fx g;

        fx_build(&g, conf_text);
        lb_state_load(&g.d, g.d.gen);
        CHECK_EQ_INT(fx_server(&g, "web", "a")->b->health.state, BAL_HEALTH_STARTING);
        fx_stop(&g);
    }
}

int
main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/lb_state_test.XXXXXX");
    if (mkdtemp(dir) == NULL)
        fx_die("mkdtemp", "failed");
    snprintf(path, sizeof(path), "%s/lb.state", dir);
    make_texts();
    test_lines();
    test_apply();
    test_file_round_trip();
    test_file_ignored();
    unlink(path);
    rmdir(dir);
    return CHECK_DONE();
}

/* Two engines in two processes through the installed C API, in plain C.
 * The parent is the initiator, the forked child the target; they swap the
 * target's segment name and buffer address over a pipe. The initiator
 * writes a pattern with a notification, sends a plain one, reads the
 * pattern back, cancels a task and reads status lists; the target checks
 * the written bytes the moment the notification arrives. Exit status 0 on
 * success; any failed check prints the call, its line and tent_last_error().
 * Every wait is bounded: alarm() ends a process that hangs. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tent/transfer_engine.h"

#define LEN (1u << 20)
#define WAIT_SECONDS 60

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: %s failed (%s)\n", role, __LINE__, #cond, \
                    tent_last_error());                                       \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static const char* role = "parent";

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 % 251); }

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void write_all(int fd, const void* data, size_t len) {
    CHECK(write(fd, data, len) == (ssize_t)len);
}

static void read_all(int fd, void* data, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char*)data + got, len - got);
        CHECK(n > 0);
        got += (size_t)n;
    }
}

/* Polls one task until it leaves PENDING (or WAITING). */
static tent_status_t wait_task(tent_engine_t e, tent_batch_id_t batch,
                               size_t task) {
    tent_status_t st;
    double deadline = now_seconds() + WAIT_SECONDS;
    do {
        CHECK(tent_task_status(e, batch, task, &st) == 0);
        if (st.status != STATUS_PENDING && st.status != STATUS_WAITING)
            return st;
    } while (now_seconds() < deadline);
    CHECK(!"task left PENDING within the bound");
    return st;
}

/* Receives until a notification named `name` arrives (others are
 * dropped). */
static tent_notifi_record_t wait_notification(tent_engine_t e,
                                              const char* name) {
    double deadline = now_seconds() + WAIT_SECONDS;
    do {
        tent_notifi_info info;
        CHECK(tent_recv_notifs(e, &info) == 0);
        for (int i = 0; i < info.num_records; ++i) {
            if (strcmp(info.records[i].name, name) == 0) {
                tent_notifi_record_t found = info.records[i];
                tent_free_notifs(&info);
                return found;
            }
        }
        tent_free_notifs(&info);
        CHECK(info.records == NULL && info.num_records == 0);
    } while (now_seconds() < deadline);
    CHECK(!"notification arrived within the bound");
    tent_notifi_record_t none;
    memset(&none, 0, sizeof(none));
    return none;
}

struct hello {
    char name[256];
    uint64_t addr;
};

static int run_target(int to_parent, int from_parent) {
    role = "target";
    tent_engine_t e = tent_create_engine();
    CHECK(e != NULL);
    CHECK(tent_available(e) == 1);

    void* buf = NULL;
    CHECK(tent_allocate_memory(e, &buf, LEN, "cpu:0") == 0);
    memset(buf, 0, LEN);
    CHECK(tent_register_memory(e, buf, LEN) == 0);

    struct hello h;
    memset(&h, 0, sizeof(h));
    CHECK(tent_segment_name(e, h.name, sizeof(h.name)) == 0);
    h.addr = (uint64_t)(uintptr_t)buf;
    write_all(to_parent, &h, sizeof(h));

    /* The notification of the WRITE comes only after its data: the bytes
     * must be complete the moment it is seen. */
    tent_notifi_record_t note = wait_notification(e, "kv-block");
    CHECK(strcmp(note.msg, "layer 0 written") == 0);
    const unsigned char* bytes = (const unsigned char*)buf;
    size_t bad = LEN;
    for (size_t i = 0; i < LEN && bad == LEN; ++i)
        if (bytes[i] != pattern(i)) bad = i;
    char verdict = bad == LEN ? 'y' : 'n';
    if (bad != LEN)
        fprintf(stderr, "target: byte %zu is %u, expected %u\n", bad,
                bytes[bad], pattern(bad));
    write_all(to_parent, &verdict, 1);

    note = wait_notification(e, "plain");
    CHECK(strcmp(note.msg, "hello from the initiator") == 0);
    char go = 'p';
    write_all(to_parent, &go, 1);

    read_all(from_parent, &go, 1); /* the initiator is done with us */
    CHECK(go == 'q');
    CHECK(tent_unregister_memory(e, buf, LEN) == 0);
    CHECK(tent_free_memory(e, buf) == 0);
    tent_destroy_engine(e);
    return verdict == 'y' ? 0 : 1;
}

static int run_initiator(int from_target, int to_target) {
    struct hello h;
    read_all(from_target, &h, sizeof(h));
    h.name[sizeof(h.name) - 1] = '\0';

    tent_engine_t e = tent_create_engine();
    CHECK(e != NULL);
    tent_segment_id_t seg = 0;
    CHECK(tent_open_segment(e, &seg, h.name) == 0);
    CHECK(seg != LOCAL_SEGMENT_ID);

    /* The target's buffer, as its descriptor publishes it. */
    tent_segment_info_t info;
    CHECK(tent_get_segment_info(e, seg, &info) == 0);
    CHECK(info.type == TYPE_MEMORY && info.num_buffers == 1);
    CHECK(info.buffers[0].base == h.addr && info.buffers[0].length == LEN);
    tent_free_segment_info(&info);
    CHECK(info.buffers == NULL);

    unsigned char* local = NULL; /* [0, LEN) source, [LEN, 2 LEN) read back */
    CHECK(tent_allocate_memory(e, (void**)&local, 2 * LEN, "cpu:0") == 0);
    CHECK(tent_register_memory(e, local, 2 * LEN) == 0);
    for (size_t i = 0; i < LEN; ++i) local[i] = pattern(i);
    memset(local + LEN, 0, LEN);

    tent_batch_id_t batch = tent_allocate_batch(e, 8);
    CHECK(batch != 0);
    tent_request_t w[2];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < 2; ++i) {
        w[i].opcode = OPCODE_WRITE;
        w[i].source = local + i * (LEN / 2);
        w[i].target_id = seg;
        w[i].target_offset = h.addr + i * (LEN / 2);
        w[i].length = LEN / 2;
    }
    CHECK(tent_submit_notif(e, batch, w, 2, "kv-block", "layer 0 written") ==
          0);
    for (size_t t = 0; t < 2; ++t) {
        tent_status_t st = wait_task(e, batch, t);
        CHECK(st.status == STATUS_COMPLETED);
        CHECK(st.transferred_bytes == LEN / 2);
    }
    char go = 0, verdict = 0;
    read_all(from_target, &verdict, 1);
    CHECK(verdict == 'y');
    CHECK(tent_send_notifs(e, seg, "plain", "hello from the initiator") == 0);
    read_all(from_target, &verdict, 1);
    CHECK(verdict == 'p');

    tent_request_t r;
    memset(&r, 0, sizeof(r));
    r.opcode = OPCODE_READ;
    r.source = local + LEN;
    r.target_id = seg;
    r.target_offset = h.addr;
    r.length = LEN;
    r.transport_hint = TRANSPORT_TCP;
    CHECK(tent_submit(e, batch, &r, 1) == 0);
    CHECK(wait_task(e, batch, 2).status == STATUS_COMPLETED);
    CHECK(memcmp(local, local + LEN, LEN) == 0);

    /* Cancel: best effort, it returns at once; the task then ends
     * CANCELED, or COMPLETED when it had completed before the cancel. */
    CHECK(tent_submit(e, batch, &w[0], 1) == 0);
    CHECK(tent_cancel_task(e, batch, 3) == 0);
    tent_status_t st = wait_task(e, batch, 3);
    CHECK(st.status == STATUS_CANCELED || st.status == STATUS_COMPLETED);

    tent_status_t list[8];
    size_t count = 8;
    CHECK(tent_task_status_list(e, batch, list, &count) == 0);
    CHECK(count == 4);
    CHECK(list[0].status == STATUS_COMPLETED &&
          list[0].transferred_bytes == LEN / 2);
    CHECK(list[2].status == STATUS_COMPLETED &&
          list[2].transferred_bytes == LEN);
    CHECK(list[3].status == st.status);
    count = 1;
    CHECK(tent_task_status_list(e, batch, list, &count) == 0);
    CHECK(count == 4);

    CHECK(tent_free_batch(e, batch) == 0);
    CHECK(tent_close_segment(e, seg) == 0);
    go = 'q';
    write_all(to_target, &go, 1);
    CHECK(tent_unregister_memory(e, local, 2 * LEN) == 0);
    CHECK(tent_free_memory(e, local) == 0);
    tent_destroy_engine(e);
    return 0;
}

int main(void) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return 1;
    /* Fork before any engine exists: a child of a threaded parent may only
     * call async-signal-safe functions. */
    pid_t child = fork();
    if (child < 0) return 1;
    alarm(2 * WAIT_SECONDS);
    if (child == 0) {
        close(up[0]);
        close(down[1]);
        _exit(run_target(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    int rc = run_initiator(up[0], down[1]);
    int status = 0;
    if (waitpid(child, &status, 0) != child) return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "parent: target exited with status %d\n", status);
        return 1;
    }
    if (rc == 0)
        printf("two_engines: OK (%u bytes written, read, checked)\n", LEN);
    return rc;
}

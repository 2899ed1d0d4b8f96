// A Snap7 1.4 server (sources from the npm tarball node-snap7@1.0.9) for
// the S7 connector tests:
//   s7server ADDRESS PORT
// DB1 (256 bytes): DBW0 a counter +1 every 100 ms, DBW2 INT -1234,
// DBD4 REAL 21.5, DBB8 bits 0 and 2 set, DBD10 DINT -100000,
// DBD14 DWORD 4000000000, DBB20.. "HELLO-S7", DBB30 LREAL -1.25e10,
// DBW40 WORD 65000. DB2 (64 bytes) and MK (64 bytes) zero.
#include "snap7_libmain.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

static byte DB1[256], DB2[64], MK[64];

static void put(byte *p, const void *v, int n) { // big-endian
    const byte *b = (const byte *)v;
    for (int i = 0; i < n; i++) p[i] = b[n - 1 - i];
}

int main(int argc, char **argv) {
    word port = argc > 2 ? (word)atoi(argv[2]) : 102;
    short i16 = -1234; float r = 21.5f; int di = -100000; unsigned dw = 4000000000u; double lr = -1.25e10;
    unsigned short w = 65000;
    put(DB1 + 2, &i16, 2); put(DB1 + 4, &r, 4); DB1[8] = 0x05; put(DB1 + 10, &di, 4); put(DB1 + 14, &dw, 4);
    memcpy(DB1 + 20, "HELLO-S7", 8); put(DB1 + 30, &lr, 8); put(DB1 + 40, &w, 2);
    S7Object srv = Srv_Create();
    Srv_SetParam(srv, p_u16_LocalPort, &port);
    Srv_RegisterArea(srv, srvAreaDB, 1, DB1, sizeof DB1);
    Srv_RegisterArea(srv, srvAreaDB, 2, DB2, sizeof DB2);
    Srv_RegisterArea(srv, srvAreaMK, 0, MK, sizeof MK);
    if (Srv_StartTo(srv, argc > 1 ? argv[1] : "127.0.0.1")) { fprintf(stderr, "cannot listen\n"); return 1; }
    printf("ready\n"); fflush(stdout);
    for (unsigned short n = 0;; n++) {
        usleep(100000);
        Srv_LockArea(srv, srvAreaDB, 1); DB1[0] = n >> 8; DB1[1] = n & 0xff; Srv_UnlockArea(srv, srvAreaDB, 1);
    }
}

"""A stranger at dpbench's TCP rendezvous (tests/scripts/test_rendezvous_trust.sh): connects to
127.0.0.1:PORT once rank 0 listens and misbehaves in one of several ways, writing "connected" and
then what rank 0 answered (the message types) to OUT. It holds its connections open until killed.

Usage: rendezvous_stranger.py MODE PORT OUT [IDENTITY [TOKEN]]
       rendezvous_stranger.py listening-port PID   (prints the port PID listens on, once it does)
  garbage      random bytes
  huge         a message header announcing 2^34 bytes, then nothing
  forged       a hello of the right shape for rank 1 of 2, without a valid proof
  other-job    a hello for rank 1 of 2 with a valid proof for IDENTITY and TOKEN (another job's)
  ids-without-token   the same, meant with the job's own ids but without its token
  idle         three connections that never say anything
  trickle      a new silent connection every 0.3 s
  squat        listens on PORT itself and never speaks to whoever connects
The hello's layout and proof follow engine/communication/rendezvous_handshake.cpp."""
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

HELLO, CHALLENGE = 1, 8


def connect(port):
    end = time.time() + 20
    while time.time() < end:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.02)
    sys.exit("nothing listened on %d" % port)


def receive_exactly(sock, count):
    data = b""
    while len(data) < count:
        piece = sock.recv(count - len(data))
        if not piece:
            raise ConnectionError("closed")
        data += piece
    return data


def receive_frame(sock):
    kind, length = struct.unpack("<BQ", receive_exactly(sock, 9))
    return kind, receive_exactly(sock, length)


def frame(kind, body):
    return struct.pack("<BQ", kind, len(body)) + body


def hello(nonce, identity, token, prove):
    body = b"DPB2" + bytes([0]) + struct.pack("<iii", 1, 2, 1) + os.urandom(32) + bytes([8]) + b"stranger"
    message = b"dpbench rendezvous hello\0" + identity + b"\0" + nonce + body
    proof = hmac.new(token, message, hashlib.sha256).digest() if prove else bytes(32)
    return body + proof


def listening_port(pid):
    end = time.time() + 20
    while time.time() < end:
        sockets = set()
        for fd in os.listdir("/proc/%s/fd" % pid):
            try:
                target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                sockets.add(target[8:-1])
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in open(table).readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in sockets:  # 0A: listening
                    return int(fields[1].rsplit(":", 1)[1], 16)
        time.sleep(0.05)
    sys.exit("process %s listens nowhere" % pid)


def main():
    if sys.argv[1] == "listening-port":
        print(listening_port(sys.argv[2]))
        return
    mode, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    identity = sys.argv[4].encode() if len(sys.argv) > 4 else b""
    token = sys.argv[5].encode() if len(sys.argv) > 5 else b""
    held = []
    report = open(out, "w", buffering=1)
    if mode == "squat":
        server = socket.socket()
        server.bind(("127.0.0.1", port))
        server.listen(16)
        report.write("connected\n")
        while True:
            held.append(server.accept()[0])
    if mode == "trickle":
        held.append(connect(port))
        report.write("connected\n")
        while True:
            time.sleep(0.3)
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                pass
    count = 3 if mode == "idle" else 1
    held = [connect(port) for _ in range(count)]
    report.write("connected\n")
    sock = held[0]
    if mode == "garbage":
        sock.sendall(os.urandom(4096))
    elif mode == "huge":
        sock.sendall(struct.pack("<BQ", HELLO, 1 << 34))
    elif mode in ("forged", "other-job", "ids-without-token"):
        kind, challenge = receive_frame(sock)
        if kind != CHALLENGE:
            report.write("no challenge: %d\n" % kind)
        sock.sendall(frame(HELLO, hello(challenge[4:], identity, token, mode != "forged")))
        try:
            report.write("answer %d\n" % receive_frame(sock)[0])
        except ConnectionError:
            report.write("closed\n")
    time.sleep(600)


if __name__ == "__main__":
    main()

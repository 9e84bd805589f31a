#!/usr/bin/env python3
"""Prints N distinct loopback ports that are free now, separated by spaces.

   tests/support/free_ports.py N

The ports are picked at random below the kernel's ephemeral range: a port the kernel hands out
(bind to port 0, the source port of any outgoing connection) can be taken by another process
between this probe and the caller's bind, one below that range only by a program that binds it
on purpose. Each port is bound while the others are picked, so they are distinct.
"""
import random
import socket
import sys

LOWEST = 10000


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit("usage: free_ports.py N")
    count = int(sys.argv[1])
    top = ephemeral_low()
    held = []
    for _ in range(count * 200):
        if len(held) == count:
            break
        s = socket.socket()
        port = random.randrange(LOWEST, top) if top - LOWEST >= 1000 else 0
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append(s)
    if len(held) < count:
        sys.exit(f"free_ports.py: found {len(held)} free loopback ports of {count}")
    print(" ".join(str(s.getsockname()[1]) for s in held))
    for s in held:
        s.close()


if __name__ == "__main__":
    main()

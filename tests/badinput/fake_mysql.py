#!/usr/bin/python3
"""A MySQL server impostor for issue 24 (1): it offers no TLS and asks for an authentication plugin
(mysql_clear_password: the client sends the password as it is). It serves one connection on a free
loopback port, writes the port to PORT_FILE, and every byte the client sent to RECORD_FILE; then
it refuses the login (error 1045). It never waits more than 10 s.

    fake_mysql.py PORT_FILE RECORD_FILE [PLUGIN]
"""
import os
import socket
import struct
import sys

CLIENT_LONG_PASSWORD = 1  # "CLIENT_MYSQL" to MariaDB's client: a MySQL server, no extended caps
CLIENT_CONNECT_WITH_DB = 8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_PLUGIN_AUTH_LENENC = 0x200000
# No CLIENT_SSL (0x800): this server offers no TLS.
CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_CONNECT_WITH_DB | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH | CLIENT_PLUGIN_AUTH_LENENC)


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def read_packet(conn, received):
    head = b""
    while len(head) < 4:
        chunk = conn.recv(4 - len(head))
        if not chunk:
            return None, None
        head += chunk
    received.extend(head)
    length = int.from_bytes(head[:3], "little")
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    received.extend(body)
    return head[3], body


def main():
    port_file, record_file = sys.argv[1], sys.argv[2]
    plugin = (sys.argv[3] if len(sys.argv) > 3 else "mysql_clear_password").encode()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(10)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(tmp, port_file)
    received = bytearray()
    try:
        conn, _ = listener.accept()
    except socket.timeout:
        return
    conn.settimeout(10)
    scramble = b"abcdefghijklmnopqrst"
    greeting = (b"\x0a" + b"5.7.99-impostor\x00" + struct.pack("<I", 7) + scramble[:8] + b"\x00"
                + struct.pack("<H", CAPABILITIES & 0xFFFF) + b"\x21" + struct.pack("<H", 2)
                + struct.pack("<H", CAPABILITIES >> 16) + bytes([len(scramble) + 1]) + b"\x00" * 10
                + scramble[8:] + b"\x00" + plugin + b"\x00")
    try:
        conn.sendall(packet(0, greeting))
        seq, body = read_packet(conn, received)
        if body is not None:
            # The response names the plugin its data was made for, last; another one gets a switch.
            named = body.rstrip(b"\x00").rsplit(b"\x00", 1)[-1]
            if named != plugin:
                conn.sendall(packet(seq + 1, b"\xfe" + plugin + b"\x00" + scramble + b"\x00"))
                seq, body = read_packet(conn, received)
            if body is not None:
                error = b"\xff" + struct.pack("<H", 1045) + b"#28000" + b"Access denied (impostor)"
                conn.sendall(packet(seq + 1, error))
                read_packet(conn, received)  # until the client closes (COM_QUIT or EOF)
    except (socket.timeout, ConnectionError):
        pass
    finally:
        conn.close()
        with open(record_file, "wb") as f:
            f.write(received)


if __name__ == "__main__":
    main()

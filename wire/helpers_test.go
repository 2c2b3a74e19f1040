package wire

// self is data2 = -1: the client registered on the connection.
const self = 0xFFFFFFFF

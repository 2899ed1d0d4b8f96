# A Modbus RTU slave on a serial device (pymodbus, Debian python3-pymodbus):
#   /usr/bin/python3 rtu_server.py DEVICE FIRST
# 100 holding registers FIRST, FIRST+1, ...; 100 coils; slave id 1.
import logging
import sys

from pymodbus.datastore import ModbusSequentialDataBlock, ModbusSlaveContext, ModbusServerContext
from pymodbus.server import StartSerialServer
from pymodbus.transaction import ModbusRtuFramer

logging.disable(logging.CRITICAL)  # pymodbus logs harmless "Handler ... canceled" errors
first = int(sys.argv[2])
store = ModbusSlaveContext(hr=ModbusSequentialDataBlock(0, [first + i for i in range(100)]),
                           co=ModbusSequentialDataBlock(0, [False] * 100), zero_mode=True)
ctx = ModbusServerContext(slaves={1: store}, single=False)
print("ready", flush=True)
StartSerialServer(context=ctx, framer=ModbusRtuFramer, port=sys.argv[1], baudrate=19200,
                  bytesize=8, parity="N", stopbits=1, timeout=0.05)

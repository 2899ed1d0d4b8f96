// An OPC UA server for the connector tests (node-opcua@2.182.2):
//   NODE_PATH=<dir>/node_modules node server.js PORT PKIDIR
// ns=1 variables: Counter (Int32, +1 every 100 ms, read-only), and one
// read/write variable per type: I16 U16 I32 U32 F32 F64 Flag Text.
const { OPCUAServer, Variant, DataType, StatusCodes, SecurityPolicy, MessageSecurityMode,
        OPCUACertificateManager } = require("node-opcua");
(async () => {
  const port = Number(process.argv[2] || 4840);
  const server = new OPCUAServer({
    port, host: "127.0.0.1", hostname: "127.0.0.1",
    securityPolicies: [SecurityPolicy.None, SecurityPolicy.Basic256Sha256],
    securityModes: [MessageSecurityMode.None, MessageSecurityMode.SignAndEncrypt], allowAnonymous: true,
    serverCertificateManager: new OPCUACertificateManager({ rootFolder: process.argv[3] || "pki",
                                                            automaticallyAcceptUnknownCertificate: true }) });
  await server.initialize();
  const ns = server.engine.addressSpace.getOwnNamespace();
  const dev = ns.addObject({ organizedBy: server.engine.addressSpace.rootFolder.objects, browseName: "Plant" });
  let counter = 0; setInterval(() => counter++, 100);
  ns.addVariable({ componentOf: dev, nodeId: "s=Counter", browseName: "Counter", dataType: "Int32",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Int32, value: counter }) } });
  const rw = (name, dataType, v) => ns.addVariable({ componentOf: dev, nodeId: "s=" + name, browseName: name,
    dataType, minimumSamplingInterval: 50,
    accessLevel: "CurrentRead | CurrentWrite", userAccessLevel: "CurrentRead | CurrentWrite",
    value: { get: () => new Variant({ dataType: DataType[dataType], value: v }),
             set: (x) => { v = x.value; return StatusCodes.Good; } } });
  rw("I16", "Int16", -1234); rw("U16", "UInt16", 65000); rw("I32", "Int32", -100000); rw("U32", "UInt32", 4000000000);
  rw("F32", "Float", 21.5); rw("F64", "Double", -1.25e10); rw("Flag", "Boolean", true); rw("Text", "String", "hello");
  await server.start();
  console.log("ready", server.getEndpointUrl());
  const stop = async () => { await server.shutdown(10); process.exit(0); };
  process.on("SIGTERM", stop); process.on("SIGINT", stop);
})().catch((e) => { console.error(e); process.exit(1); });

// A node-opcua@2.182.2 client for OPCUA_SERVER:
//   NODE_PATH=<dir>/node_modules node client.js URL ID[,ID...] [WRITE_ID DATATYPE VALUE]
// prints {"<id>":{"status":..,"value":..},...,"write":"<status>"}.
const { OPCUAClient, AttributeIds, DataType, MessageSecurityMode, SecurityPolicy } = require("node-opcua");
(async () => {
  const [url, readIds, writeId, writeType, writeValue] = process.argv.slice(2);
  const client = OPCUAClient.create({ endpointMustExist: false, securityMode: MessageSecurityMode.None,
    securityPolicy: SecurityPolicy.None, connectionStrategy: { maxRetry: 0, initialDelay: 100 } });
  await client.connect(url);
  const session = await client.createSession();
  const out = {};
  for (const id of readIds.split(",")) {
    const dv = await session.read({ nodeId: id, attributeId: AttributeIds.Value });
    out[id] = { status: dv.statusCode.name, value: dv.value.value };
  }
  if (writeId) {
    const v = writeType === "String" ? writeValue : writeType === "Boolean" ? writeValue === "true" : Number(writeValue);
    const sc = await session.write({ nodeId: writeId, attributeId: AttributeIds.Value,
      value: { value: { dataType: DataType[writeType], value: v } } });
    out.write = sc.name;
  }
  console.log(JSON.stringify(out));
  await session.close();
  await client.disconnect();
})().catch((e) => { console.error(e.message); process.exit(1); });

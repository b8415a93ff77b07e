-- Demo data for `make run`: shop types and a few shops with fixed ids.
-- INSERT IGNORE makes a second load change nothing, and never overwrites a
-- row someone has edited since.
INSERT IGNORE INTO tb_shop_type (id, name, icon, sort) VALUES
  (1, '美食', '/types/ms.png', 1),
  (2, 'KTV', '/types/KTV.png', 2),
  (3, '丽人·美发', '/types/lrmf.png', 3),
  (4, '健身运动', '/types/jsyd.png', 10),
  (5, '按摩·足疗', '/types/amzl.png', 5),
  (6, '美容SPA', '/types/spa.png', 6),
  (7, '亲子游乐', '/types/qzyl.png', 7),
  (8, '酒吧', '/types/jiuba.png', 8),
  (9, '轰趴馆', '/types/hpg.png', 9),
  (10, '美睫·美甲', '/types/mjmj.png', 4);
INSERT IGNORE INTO tb_shop (id, name, type_id, images, area, address, x, y, avg_price, sold, comments, score, open_hours) VALUES
  (1, '103茶餐厅', 1, 'https://img.example.com/shop/1a.jpg,https://img.example.com/shop/1b.jpg', '大关', '金华路锦昌文华苑29号', 120.149192, 30.316078, 80, 4215, 3035, 37, '10:00-22:00'),
  (2, '蔡馬洪涛烤肉·老北京铜锅涮羊肉', 1, 'https://img.example.com/shop/2a.jpg', '拱宸桥/上塘', '上塘路1035号', 120.151505, 30.333422, 85, 2160, 1460, 46, '11:30-03:00'),
  (3, '新白鹿餐厅(运河上街店)', 1, 'https://img.example.com/shop/3a.jpg', '运河上街', '台州路2号运河上街购物中心F5', 120.151954, 30.32497, 61, 12035, 8045, 47, '10:30-21:00'),
  (4, 'Mamala(杭州远洋乐堤港店)', 1, 'https://img.example.com/shop/4a.jpg', '拱宸桥/上塘', '丽水路66号远洋乐堤港商城2期1层B115号', 120.146659, 30.312742, 290, 13519, 9529, 49, '11:00-22:00'),
  (5, '海底捞火锅(水晶城购物中心店)', 1, 'https://img.example.com/shop/5a.jpg', '大关', '上塘路458号水晶城购物中心F6', 120.15778, 30.310633, 104, 4125, 2764, 49, '10:00-07:00'),
  (6, '星聚会KTV(拱墅区万达店)', 2, 'https://img.example.com/shop/6a.jpg', '北部新城', '杭州市拱墅区金华路80号万达广场4F', 120.138, 30.3163, 67, 1208, 854, 45, '11:30-06:00');
-- Two authors and their notes for the home page's hot list; the authors
-- are found by phone, so the seed never takes an id a real user has.
INSERT IGNORE INTO tb_user (phone, nick_name, icon) VALUES
  ('13600000001', '小鱼同学', '/imgs/blogs/blog1.jpg'),
  ('13600000002', '可可今天不吃肉', '');
INSERT IGNORE INTO tb_blog (id, shop_id, user_id, title, images, content, liked, comments)
  SELECT 1, 1, id, '人均30的港式茶餐厅，值得排队', '/imgs/blogs/9/12/ac2ce2fb-0605-4f14-82cc-c962b8c86688.jpg,/imgs/blogs/blog1.jpg',
    '叉烧饭和冻柠茶都很好，周末中午要等二十分钟。', 12, 3 FROM tb_user WHERE phone = '13600000002';
INSERT IGNORE INTO tb_blog (id, shop_id, user_id, title, images, content, liked, comments)
  SELECT 2, 4, id, '花园里的西餐厅，晚上灯一亮很好看', '/imgs/blogs/2/6/b0756279-65da-4f2d-b62a-33f74b06454a.jpg',
    '牛排七分熟刚好，甜点一般，环境加分。', 8, 1 FROM tb_user WHERE phone = '13600000002';
INSERT IGNORE INTO tb_blog (id, shop_id, user_id, title, images, content, liked, comments)
  SELECT 3, 10, id, '周末去骑马，五十块一圈', '/imgs/blogs/blog1.jpg',
    '教练很耐心，小朋友也可以骑。', 5, 0 FROM tb_user WHERE phone = '13600000001';
